"""The backend TCK on PostgreSQL, MariaDB and SQLite (a file shared by several processes)."""

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
