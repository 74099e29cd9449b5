"""SQL dialects of the database backend, one module per database family."""

from __future__ import annotations

from ....spi import DEFAULT_TIMEOUT, ConfigurationError
from .base import Dialect


def dialect_for(
    vendor: str, *, transaction_pooling: bool = False, timeout: float = DEFAULT_TIMEOUT, notify: bool = True
) -> Dialect:
    """The dialect of a Django database vendor ("postgresql", "mysql", "sqlite").

    PostgreSQL: ``transaction_pooling``, the connections go through PgBouncer in transaction
    mode; ``notify``, releases and group changes send NOTIFY (False where nobody listens).
    """
    if vendor == "postgresql":
        from .postgresql import PostgresqlDialect

        return PostgresqlDialect(transaction_pooling=transaction_pooling, timeout=timeout, notify=notify)
    if transaction_pooling:
        raise ConfigurationError(f"transaction_pooling is for PostgreSQL, not {vendor}")
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
