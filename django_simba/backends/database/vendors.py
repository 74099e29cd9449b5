"""Which vendor's backend serves a database alias: the choice made where the backend is loaded.

SIMBA's ``"database"`` names :class:`AnyDatabaseBackend`, and the loader builds it with
:meth:`~django_simba.spi.LeaseBackend.build`, which returns the backend of the alias's
vendor. The vendors' modules know only their shared base (``backend``); this one knows
them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...spi import DEFAULT_TIMEOUT, ConfigurationError
from .backend import DatabaseBackend
from .mysql import MysqlBackend
from .options import alias_vendor, parse_options
from .postgresql import PolledPostgresqlBackend, PostgresqlBackend
from .sqlite import SqliteBackend


def vendor_backend(options: Mapping[str, Any] | None) -> type[DatabaseBackend]:
    """The class of the backend for ``options``: its alias's vendor's (PostgreSQL behind a pooler
    in transaction mode, with no direct connection to LISTEN on, is polled)."""
    parsed = parse_options(options)
    vendor = alias_vendor(parsed.alias)
    if vendor == "postgresql":
        polled = parsed.transaction_pooling and parsed.listen is None
        return PolledPostgresqlBackend if polled else PostgresqlBackend
    if vendor == "mysql":
        return MysqlBackend
    if vendor == "sqlite":
        return SqliteBackend
    raise ConfigurationError(
        f"the database backend supports PostgreSQL, MySQL/MariaDB and SQLite, not {vendor!r}"
    )


class AnyDatabaseBackend(DatabaseBackend):
    """The database backend of the alias's vendor: what SIMBA's ``"database"`` names.

    It has no SQL of its own, so it is never built itself: :meth:`build` returns the
    vendor's backend (:func:`vendor_backend`).
    """

    @classmethod
    def build(
        cls, options: Mapping[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> DatabaseBackend:
        return vendor_backend(options)(options, timeout=timeout)
