"""Django settings of the benchmark processes: one alias per database server, on databases of their own.

The benchmark never touches the test suite's databases: PostgreSQL and MariaDB get a
``simba_bench`` database, SQLite a file under the system's temporary directory. The
``SIMBA_BENCH_*`` variables override the connection settings.
"""

import os
import tempfile
from pathlib import Path

SECRET_KEY = "django-simba-benchmarks"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

BENCH_DIR = Path(os.environ.get("SIMBA_BENCH_DIR") or Path(tempfile.gettempdir()) / "simba-bench")
DATABASE_NAME = os.environ.get("SIMBA_BENCH_DB", "simba_bench")

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(BENCH_DIR / "default.sqlite3"),
    },
    "sqlite": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(BENCH_DIR / "simba-bench.sqlite3"),
        "OPTIONS": {"timeout": 5},
    },
    "postgresql": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": os.environ.get("SIMBA_BENCH_PG_USER", "root"),
        "PASSWORD": os.environ.get("SIMBA_BENCH_PG_PASSWORD", ""),
        "HOST": os.environ.get("SIMBA_BENCH_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("SIMBA_BENCH_PG_PORT", "5432"),
    },
    "mysql": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": DATABASE_NAME,
        "USER": os.environ.get("SIMBA_BENCH_MYSQL_USER", "root"),
        "PASSWORD": os.environ.get("SIMBA_BENCH_MYSQL_PASSWORD", ""),
        "HOST": os.environ.get("SIMBA_BENCH_MYSQL_HOST", "127.0.0.1"),
        "PORT": os.environ.get("SIMBA_BENCH_MYSQL_PORT", "3306"),
        "OPTIONS": {"charset": "utf8mb4"},
    },
}

INSTALLED_APPS = ["django_simba"]

# Nothing starts by itself: every engine of the benchmark is built and closed by the harness.
SIMBA = {"BACKEND": "memory", "AUTOSTART": False}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler", "level": "WARNING"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
