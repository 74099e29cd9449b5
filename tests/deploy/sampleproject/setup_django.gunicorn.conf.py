"""A gunicorn config file that sets Django up as it loads (before gunicorn daemonizes or forks)."""

import django

django.setup()
