"""Django settings for the test suite.

``SIMBA_TEST_DB`` (sqlite | postgresql | mysql) chooses the ``default`` database;
the aliases ``sqlite``, ``postgresql`` and ``mysql`` exist where their drivers import
(psycopg, mysqlclient: the test-integration extra), so the database backend's tests run
on all three in one run, and the fast tier needs neither. Servers are on loopback with the
credentials of the CI machine; ``SIMBA_PG_*`` / ``SIMBA_MYSQL_*`` override them. The
``redis`` cache exists where django-redis imports.
"""

import os
import tempfile
from importlib.util import find_spec
from pathlib import Path
from typing import Any

SECRET_KEY = "django-simba-tests"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "tests.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_SQLITE_DIR = Path(os.environ.get("SIMBA_SQLITE_DIR") or tempfile.gettempdir())
# Set once per test run and inherited by child processes, so they open the same SQLite files.
_RUN_ID = os.environ.setdefault("SIMBA_TEST_RUN_ID", str(os.getpid()))
# The servers' test databases too: two runs at once on one machine (two checkouts) would otherwise
# share ``test_test``, and one's teardown drop it under the other.
_SERVER_TEST_DB = "test_simba_" + "".join(c if c.isalnum() else "_" for c in _RUN_ID)

DATABASE_CHOICES: dict[str, dict[str, Any]] = {
    "sqlite": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(_SQLITE_DIR / f"simba-tests-{_RUN_ID}.sqlite3"),
        # a file database shared by several processes in the tests
        "TEST": {"NAME": str(_SQLITE_DIR / f"simba-tests-{_RUN_ID}-test.sqlite3")},
        "OPTIONS": {"timeout": 5},
    },
    "postgresql": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("SIMBA_PG_NAME", "test"),
        "USER": os.environ.get("SIMBA_PG_USER", "root"),
        "PASSWORD": os.environ.get("SIMBA_PG_PASSWORD", ""),
        "HOST": os.environ.get("SIMBA_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("SIMBA_PG_PORT", "5432"),
        "TEST": {"NAME": _SERVER_TEST_DB},
    },
    "mysql": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": os.environ.get("SIMBA_MYSQL_NAME", "test"),
        "USER": os.environ.get("SIMBA_MYSQL_USER", "root"),
        "PASSWORD": os.environ.get("SIMBA_MYSQL_PASSWORD", ""),
        "HOST": os.environ.get("SIMBA_MYSQL_HOST", "127.0.0.1"),
        "PORT": os.environ.get("SIMBA_MYSQL_PORT", "3306"),
        "OPTIONS": {"charset": "utf8mb4"},
        "TEST": {"NAME": _SERVER_TEST_DB, "CHARSET": "utf8mb4", "COLLATION": "utf8mb4_unicode_ci"},
    },
}

#: The modules that Django's backend of each server alias can use (psycopg, mysqlclient).
_DRIVERS = {"postgresql": ("psycopg", "psycopg2"), "mysql": ("MySQLdb",)}

_DEFAULT = os.environ.get("SIMBA_TEST_DB", "sqlite")
if _DEFAULT not in DATABASE_CHOICES:
    raise RuntimeError(f"SIMBA_TEST_DB must be one of {sorted(DATABASE_CHOICES)}, not {_DEFAULT!r}")
for _alias, _modules in _DRIVERS.items():
    if not any(find_spec(module) for module in _modules):
        if _alias == _DEFAULT:
            raise RuntimeError(f"SIMBA_TEST_DB={_alias} needs its driver (the test-integration extra)")
        del DATABASE_CHOICES[_alias]

DATABASES = {"default": dict(DATABASE_CHOICES[_DEFAULT])}
DATABASES.update({alias: dict(config) for alias, config in DATABASE_CHOICES.items()})
# The same server under two aliases would get the same test database: make them one mirror.
DATABASES[_DEFAULT]["TEST"] = {**DATABASES[_DEFAULT].get("TEST", {}), "MIRROR": "default"}

CACHES: dict[str, dict[str, Any]] = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
if find_spec("django_redis") is not None:
    CACHES["redis"] = {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": os.environ.get("SIMBA_REDIS_URL", "redis://127.0.0.1:6379/15"),
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_simba",
]

STATIC_URL = "/static/"

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

SIMBA = {"BACKEND": "memory", "AUTOSTART": False, "LEASE_DURATION": 3, "RENEW_INTERVAL": 1}
