"""Settings of the sample project the deployment tests serve.

Everything the tests vary comes from the environment: the Redis URL (``SIMBA_REDIS_URL``),
the election its app starts in ``ready()`` (``DEPLOY_ELECTION``), extra ``SIMBA`` keys
(``DEPLOY_SIMBA``, JSON), a beat's queue and election (``DEPLOY_BEAT_QUEUE``,
``DEPLOY_BEAT_ELECTION``) and databases (``DEPLOY_DATABASES``, JSON: the database backend's
tests point ``default`` at the test run's database).
"""

import json
import os

SECRET_KEY = "django-simba-deploy-tests"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
ROOT_URLCONF = "deploysite.urls"
WSGI_APPLICATION = "deploysite.wsgi.application"
DATABASES: dict[str, dict[str, str]] = json.loads(os.environ.get("DEPLOY_DATABASES") or "{}")
# The app that starts an election comes first, so its ready() runs before django_simba's.
INSTALLED_APPS = ["deploysite.leader", "django_simba"]
REDIS_URL = os.environ.get("SIMBA_REDIS_URL", "redis://127.0.0.1:6379/15")
SIMBA = {
    "BACKEND": "redis",
    "OPTIONS": {"url": REDIS_URL},
    "LEASE_DURATION": 10,
    "RENEW_INTERVAL": 2,
    **json.loads(os.environ.get("DEPLOY_SIMBA") or "{}"),
}
CELERY_BROKER_URL = REDIS_URL
# A beat test names its queue and its election: one tick every half second, sent by the leading beat.
if os.environ.get("DEPLOY_BEAT_QUEUE"):
    CELERY_BEAT_SCHEDULER = "django_simba.integrations.celery_beat:LeaderScheduler"
    CELERY_BEAT_SIMBA_ELECTION = os.environ["DEPLOY_BEAT_ELECTION"]
    _QUEUE = os.environ["DEPLOY_BEAT_QUEUE"]
    _TICK = {"task": "deploysite.tick", "schedule": 0.5, "options": {"queue": _QUEUE}}
    CELERY_BEAT_SCHEDULE = {"tick": _TICK}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_simba": {"handlers": ["console"], "level": "INFO"}},
}
