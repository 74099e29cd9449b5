"""Builds the database backend in a spawned process (the TCK's multi-process test).

The child configures Django itself, then points the alias at the parent's test
database (its name depends on the parent: a test prefix, a pid for SQLite).
"""

from __future__ import annotations

import os
from typing import Any

from django_simba.backends.database import DatabaseBackend


def build_backend(alias: str, database: dict[str, Any], timeout: float) -> DatabaseBackend:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.db import connections

    connections.settings[alias].update(database)
    return DatabaseBackend({"alias": alias}, timeout=timeout)


def spec_for(alias: str, timeout: float = 5.0) -> tuple[str, dict[str, Any]]:
    """The TCK's ``backend_spec`` for ``alias``, as the calling (parent) process sees it."""
    from django.db import connections

    database = {"NAME": connections[alias].settings_dict["NAME"]}
    return f"{__name__}.build_backend", {"alias": alias, "database": database, "timeout": timeout}
