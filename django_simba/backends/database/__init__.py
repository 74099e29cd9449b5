"""Database backend: PostgreSQL, MySQL/MariaDB and SQLite through Django's database settings."""

from .backend import DatabaseBackend, MysqlBackend, PostgresqlBackend, SqliteBackend

__all__ = ["DatabaseBackend", "MysqlBackend", "PostgresqlBackend", "SqliteBackend"]
