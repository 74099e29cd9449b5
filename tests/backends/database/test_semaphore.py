"""The semaphore TCK on PostgreSQL (NOTIFY wakes the waiters), MariaDB and SQLite (polled).

Each engine has a backend of its own; the other processes configure Django themselves and
point the alias at this run's test database.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from django_simba.backends.database import DatabaseBackend
from django_simba.testing import SemaphoreTCK

from .conftest import on
from .factory import spec_for


class DatabaseSemaphoreTCK(SemaphoreTCK):
    alias: str

    @pytest.fixture
    def backend(self, make_backend: Callable[..., DatabaseBackend]) -> DatabaseBackend:
        return make_backend()

    @pytest.fixture
    def other_backend(self, make_backend: Callable[..., DatabaseBackend]) -> DatabaseBackend:
        return make_backend()

    @pytest.fixture
    def backend_spec(self, alias: str) -> tuple[str, dict[str, Any]]:
        return spec_for(alias)


@pytest.mark.usefixtures("alias")
class TestSqlite(DatabaseSemaphoreTCK):
    alias = "sqlite"
    pytestmark = on("sqlite")


@pytest.mark.usefixtures("alias")
class TestPostgresql(DatabaseSemaphoreTCK):
    alias = "postgresql"
    pytestmark = on("postgresql")


@pytest.mark.usefixtures("alias")
class TestMysql(DatabaseSemaphoreTCK):
    alias = "mysql"
    pytestmark = on("mysql")
