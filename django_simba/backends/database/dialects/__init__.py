"""SQL dialects of the database backend, one module per database family."""

from __future__ import annotations

from ....spi import ConfigurationError
from .base import Dialect


def dialect_for(vendor: str) -> Dialect:
    """The dialect of a Django database vendor ("postgresql", "mysql", "sqlite")."""
    if vendor == "postgresql":
        from .postgresql import PostgresqlDialect

        return PostgresqlDialect()
    if vendor == "mysql":
        from .mysql import MysqlDialect

        return MysqlDialect()
    if vendor == "sqlite":
        from .sqlite import SqliteDialect

        return SqliteDialect()
    raise ConfigurationError(
        f"the database backend supports PostgreSQL, MySQL/MariaDB and SQLite, not {vendor!r}"
    )


__all__ = ["Dialect", "dialect_for"]
