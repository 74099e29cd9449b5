"""Database backend: PostgreSQL, MySQL/MariaDB and SQLite through Django's database settings.

One module per vendor (its SQL and its backend), their shared base in ``backend``, and the
choice of a vendor for an alias in ``vendors`` (``AnyDatabaseBackend.build(options)``).
"""

from .backend import DatabaseBackend
from .mysql import MysqlBackend
from .postgresql import PolledPostgresqlBackend, PostgresqlBackend
from .sqlite import SqliteBackend
from .vendors import AnyDatabaseBackend, vendor_backend

__all__ = [
    "AnyDatabaseBackend",
    "DatabaseBackend",
    "MysqlBackend",
    "PolledPostgresqlBackend",
    "PostgresqlBackend",
    "SqliteBackend",
    "vendor_backend",
]
