"""A tiny project served by gunicorn in the tests; its SIMBA setting comes from the environment."""
