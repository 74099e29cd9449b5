"""Settings of the tiny project: ``SIMBA`` is the JSON in ``SIMBA_CHILD_SIMBA``; log lines carry the pid."""

import json
import os

SECRET_KEY = "django-simba-tiny-site"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.django.tinysite.urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# The app that starts an election comes first, so its ready() runs before django_simba's.
INSTALLED_APPS = [
    "tests.django.tinysite.scheduler",
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_simba",
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SIMBA_CHILD_SQLITE", ":memory:"),
    }
}
SIMBA = json.loads(os.environ.get("SIMBA_CHILD_SIMBA") or "{}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"pid": {"format": "pid=%(process)d %(levelname)s %(name)s %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "pid"}},
    "loggers": {"django_simba": {"handlers": ["stderr"], "level": "INFO", "propagate": False}},
}
