"""Optional add-ons, each needing its library only when used.

* :mod:`.prometheus`: the engine's Prometheus metrics (``prometheus_client``);
* :mod:`.health_check`: a django-health-check check of the process's session;
* :mod:`.celery_beat`: a Celery beat scheduler that schedules on the elected host only.

How the app behaves under each server is in :mod:`django_simba.servers`;
``docs/observability.rst`` says how to watch.
"""
