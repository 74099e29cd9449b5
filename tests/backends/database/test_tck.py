"""The backend TCK on PostgreSQL (directly and through PgBouncer), MariaDB and SQLite.

SQLite's database is a file shared by several processes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from django_simba.backends.database import DatabaseBackend
from django_simba.testing import BackendTCK

from .conftest import on
from .factory import spec_for


class DatabaseTCK(BackendTCK):
    alias: str
    lease_duration = 1.0

    @pytest.fixture
    def backend(self, make_backend: Callable[..., DatabaseBackend]) -> DatabaseBackend:
        return make_backend()

    @pytest.fixture
    def backend_spec(self, alias: str) -> tuple[str, dict[str, Any]]:
        return spec_for(alias)


@pytest.mark.usefixtures("alias")
class TestSqlite(DatabaseTCK):
    alias = "sqlite"
    pytestmark = on("sqlite")


@pytest.mark.usefixtures("alias")
class TestPostgresql(DatabaseTCK):
    alias = "postgresql"
    pytestmark = on("postgresql")


@pytest.mark.usefixtures("alias")
class TestMysql(DatabaseTCK):
    alias = "mysql"
    pytestmark = on("mysql")


@pytest.mark.usefixtures("alias")
class TestPostgresqlThroughPgbouncer(DatabaseTCK):
    """Transaction pooling: nothing prepared, nothing set per session; LISTEN on a direct connection."""

    alias = "postgresql"
    pytestmark = on("postgresql")
    listen = True

    @pytest.fixture
    def options(self, through_pgbouncer: dict[str, Any]) -> dict[str, Any]:
        return through_pgbouncer if self.listen else {**through_pgbouncer, "listen": None}

    @pytest.fixture
    def backend(
        self, make_backend: Callable[..., DatabaseBackend], options: dict[str, Any]
    ) -> DatabaseBackend:
        return make_backend(**options)

    @pytest.fixture
    def backend_spec(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return spec_for("postgresql", options=options)


class TestPostgresqlThroughPgbouncerPolled(TestPostgresqlThroughPgbouncer):
    """Transaction pooling with no direct connection: no LISTEN, so the engine polls."""

    listen = False
