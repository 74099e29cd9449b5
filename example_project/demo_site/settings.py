"""Settings of the example project.

SQLite by default, in ``example_project/demo.sqlite3`` (``SIMBA_EXAMPLE_SQLITE``
moves it). Environment variables switch the rest:

- ``SIMBA_EXAMPLE_DB``: ``sqlite`` (default), ``postgresql`` or ``mysql`` (MariaDB too), with
  ``SIMBA_EXAMPLE_DB_HOST``, ``_PORT``, ``_NAME``, ``_USER``, ``_PASSWORD``;
- ``SIMBA_EXAMPLE_BACKEND``: ``database`` (default: the tables in the database above),
  ``redis`` (``SIMBA_EXAMPLE_REDIS_URL``, default ``redis://127.0.0.1:6379/0``) or
  ``zookeeper`` (``SIMBA_EXAMPLE_ZK_HOSTS``, default ``127.0.0.1:2181``);
- ``SIMBA_EXAMPLE_LEASE`` / ``SIMBA_EXAMPLE_RENEW``: seconds (the demo sets 2 and 0.5).
"""

import os
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "django-simba-example-not-secret"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "demo_site.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "static/"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_simba",
    "ticks",
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]


def _database() -> dict:
    vendor = os.environ.get("SIMBA_EXAMPLE_DB", "sqlite")
    if vendor == "sqlite":
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("SIMBA_EXAMPLE_SQLITE") or str(BASE_DIR / "demo.sqlite3"),
            # Several processes share the file: WAL lets readers and the writer work at once.
            "OPTIONS": {"timeout": 20, "init_command": "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL"},
        }
    engines = {"postgresql": "django.db.backends.postgresql", "mysql": "django.db.backends.mysql"}
    if vendor not in engines:
        raise RuntimeError(f"SIMBA_EXAMPLE_DB must be sqlite, postgresql or mysql, not {vendor!r}")
    return {
        "ENGINE": engines[vendor],
        "HOST": os.environ.get("SIMBA_EXAMPLE_DB_HOST", "127.0.0.1"),
        "PORT": os.environ.get("SIMBA_EXAMPLE_DB_PORT", "5432" if vendor == "postgresql" else "3306"),
        "NAME": os.environ.get("SIMBA_EXAMPLE_DB_NAME", "test"),
        "USER": os.environ.get("SIMBA_EXAMPLE_DB_USER", "root"),
        "PASSWORD": os.environ.get("SIMBA_EXAMPLE_DB_PASSWORD", ""),
        **({"OPTIONS": {"charset": "utf8mb4"}} if vendor == "mysql" else {}),
    }


DATABASES = {"default": _database()}

_BACKEND = os.environ.get("SIMBA_EXAMPLE_BACKEND", "database")
_OPTIONS: dict = {}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
if _BACKEND == "redis":
    CACHES["simba"] = {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": os.environ.get("SIMBA_EXAMPLE_REDIS_URL", "redis://127.0.0.1:6379/0"),
    }
    _OPTIONS = {"cache": "simba"}
elif _BACKEND == "zookeeper":
    _OPTIONS = {"hosts": os.environ.get("SIMBA_EXAMPLE_ZK_HOSTS", "127.0.0.1:2181")}

_WORKER = os.environ.get("SIMBA_EXAMPLE_WORKER")

SIMBA = {
    "BACKEND": _BACKEND,
    "OPTIONS": _OPTIONS,
    "LEASE_DURATION": float(os.environ.get("SIMBA_EXAMPLE_LEASE", "15")),
    "RENEW_INTERVAL": float(os.environ.get("SIMBA_EXAMPLE_RENEW", "5")),
    # The demo names its workers, so its live view can say who leads.
    "METADATA": f"{_WORKER} pid={os.getpid()}" if _WORKER else None,
    # The demo's own process only observes: it needs no session of its own.
    "AUTOSTART": "simba_demo" not in sys.argv,
    # The demo's workers are a management command of its own: they serve, so they lead.
    "SERVING_COMMANDS": ["demo_worker"],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "django_simba": {"handlers": ["console"], "level": os.environ.get("SIMBA_EXAMPLE_LOG", "WARNING")}
    },
}
