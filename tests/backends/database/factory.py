"""Builds the database backend in a spawned process (the TCK's multi-process test).

The child configures Django itself, then points the alias at the parent's test
database (its name depends on the parent: a test prefix, a pid for SQLite).
"""

from __future__ import annotations

import os
from typing import Any

from django_simba.backends.database import AnyDatabaseBackend, DatabaseBackend


def build_backend(
    alias: str, database: dict[str, Any], timeout: float, options: dict[str, Any] | None = None
) -> DatabaseBackend:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.db import connections

    connections.settings[alias].update(database)
    return AnyDatabaseBackend.build({**(options or {}), "alias": alias}, timeout=timeout)


def spec_for(
    alias: str, timeout: float = 5.0, *, options: dict[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    """The TCK's ``backend_spec`` for ``alias`` (and backend ``options``), as the parent sees it.

    The address goes too: a test may point the alias elsewhere (PgBouncer).
    """
    from django.db import connections

    settings = connections[alias].settings_dict
    database = {key: settings[key] for key in ("NAME", "HOST", "PORT")}
    kwargs = {"alias": alias, "database": database, "timeout": timeout, "options": options}
    return f"{__name__}.build_backend", kwargs
