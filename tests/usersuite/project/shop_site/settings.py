"""The settings of a user's shop, as the documentation tells a user to write them.

``SHOP_DB`` (sqlite | sqlite-default | postgresql) picks the database and ``SHOP_SIMBA``
(database | memory) the backend of the test run; ``SHOP_DIR`` is where the SQLite files live.
``sqlite-default`` is SQLite as a new project has it: one file, no router, django-simba's tables
beside the shop's (and in tests, pytest-django's in-memory database).
"""

import os
from pathlib import Path

SECRET_KEY = "shop"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "django_simba", "shop"]

DIR = Path(os.environ.get("SHOP_DIR", "/tmp"))
KIND = os.environ.get("SHOP_DB", "sqlite")

if KIND == "sqlite":
    # SQLite: django-simba's tables in a file of their own, so the shop's write transactions
    # never wait for a lease, nor a lease for them (README.rst, "SQLite").
    DATABASES = {
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DIR / "db.sqlite3"},
        "simba": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DIR / "simba.sqlite3",
            # a file, not memory, so that another process (simba_process) can share it in tests
            "TEST": {"NAME": DIR / "test_simba.sqlite3"},
        },
    }
    DATABASE_ROUTERS = ["django_simba.routers.SimbaRouter"]
    SIMBA_OPTIONS = {"alias": "simba"}
elif KIND == "sqlite-default":
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DIR / "db.sqlite3"}}
    SIMBA_OPTIONS = {}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            # The real database does not exist: a test that reached it would fail.
            "NAME": os.environ["SHOP_PG_NAME"],
            "USER": os.environ.get("SIMBA_PG_USER", "root"),
            "PASSWORD": os.environ.get("SIMBA_PG_PASSWORD", ""),
            "HOST": os.environ.get("SIMBA_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("SIMBA_PG_PORT", "5432"),
        }
    }
    SIMBA_OPTIONS = {}

SIMBA = {"OPTIONS": SIMBA_OPTIONS, "LEASE_DURATION": 2, "RENEW_INTERVAL": 0.5, "METADATA": "shop"}

if os.environ.get("SHOP_SIMBA") == "memory":
    SIMBA = {"BACKEND": "memory", "LEASE_DURATION": 2, "RENEW_INTERVAL": 0.5}  # the one line for tests
