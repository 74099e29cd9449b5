"""Integrations with the software around the app: servers, monitoring and health checks.

Servers: only processes that serve hold sessions, and a graceful stop closes them.

* :mod:`.serving` decides whether this process serves or only starts the processes
  that do (a pre-fork parent, the autoreloader's watcher);
* :mod:`.gunicorn`, :mod:`.celery` and :mod:`.runserver` recognise those servers'
  processes (from :mod:`.recognise`: the program, and the server's own methods on
  the stack); neither gunicorn nor Celery is imported unless it runs the process;
  :mod:`.uwsgi` recognises uWSGI's master through uWSGI's own ``uwsgi`` module;
* :mod:`.wiring` connects, from ``AppConfig.ready()``, what the server needs:
  Celery's signals (a pool process closes on ``worker_process_shutdown``),
  uWSGI's hooks (a worker forked from C starts over, and closes at its exit), and
  runserver's watcher closing the session of the child it killed;
* :mod:`.asgi` closes the session on an ASGI server's lifespan shutdown;
* :mod:`.termination` closes it on SIGTERM where nothing else would.

Monitoring (each needs its library only when used):

* :mod:`.prometheus`: the engine's Prometheus metrics (``prometheus_client``);
* :mod:`.health_check`: a django-health-check check of the process's session.

``docs/deploying.rst`` says what each server needs, ``docs/observability.rst`` how to watch.
"""
