"""How the app behaves under each server: which processes serve, and a graceful stop closes the session.

* :mod:`.serving` decides whether this process serves, forks the processes that
  do (a pre-fork parent, the autoreloader's watcher), or neither (a one-off
  command); :func:`~.serving.is_serving_process` is its public question;
* :mod:`.autostart` starts the engine when Django is ready, where it serves;
* :mod:`.gunicorn`, :mod:`.uvicorn`, :mod:`.celery`, :mod:`.rq`, :mod:`.uwsgi` and
  :mod:`.autoreloader` recognise those servers' processes (from :mod:`.recognise`:
  the program, and the server's own methods on the stack); none of them imports
  its server: a process that a server does not run has none of its modules;
* :mod:`.wiring` hands the registry its steps for every engine, and connects, from
  ``AppConfig.ready()``, what the server needs: Celery's signals (a pool process
  closes on ``worker_process_shutdown``), uWSGI's hooks (a worker forked from C
  starts over, and closes at its exit), and the autoreloader's watcher closing the
  session of the child it killed;
* :mod:`.asgi` closes the session on an ASGI server's lifespan shutdown;
* :mod:`.termination` closes it on SIGTERM where nothing else would.

The optional add-ons (Prometheus metrics, a health check, one Celery beat per
cluster) are in :mod:`django_simba.integrations`. ``docs/deploying.rst`` says what
each server needs.
"""
