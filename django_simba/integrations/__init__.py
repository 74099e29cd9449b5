"""Server integrations: only processes that serve hold sessions, and a graceful stop closes them.

* :mod:`.serving` decides whether this process serves or only starts the processes
  that do (a pre-fork parent, the autoreloader's watcher);
* :mod:`.gunicorn` and :mod:`.celery` recognise those servers' parent processes (and
  wire Celery's signals); neither imports its server unless the server is running;
* :mod:`.asgi` closes the session on an ASGI server's lifespan shutdown;
* :mod:`.termination` closes it on SIGTERM where nothing else would.

``docs/deploying.rst`` says what each server needs.
"""
