"""The shared database servers, as ``tests/settings.py`` gives them (``SIMBA_PG_*``, ``SIMBA_MYSQL_*``)."""

from __future__ import annotations

from typing import Any, cast

from tests.settings import DATABASE_CHOICES

POSTGRESQL = cast(dict[str, Any], DATABASE_CHOICES["postgresql"])
MYSQL = cast(dict[str, Any], DATABASE_CHOICES["mysql"])


def postgres_dsn() -> str:
    parts = {"host": POSTGRESQL["HOST"], "port": POSTGRESQL["PORT"], "user": POSTGRESQL["USER"]}
    parts["dbname"] = POSTGRESQL["NAME"]
    if POSTGRESQL.get("PASSWORD"):
        parts["password"] = POSTGRESQL["PASSWORD"]
    return " ".join(f"{key}={value}" for key, value in parts.items())
