"""The engine TCK on PostgreSQL, MariaDB and SQLite; each engine has a backend of its own."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from django_simba.backends.database import DatabaseBackend
from django_simba.testing import EngineTCK

from .conftest import on


class DatabaseEngineTCK(EngineTCK):
    alias: str

    @pytest.fixture
    def backend(self, make_backend: Callable[..., DatabaseBackend]) -> DatabaseBackend:
        return make_backend()

    @pytest.fixture
    def other_backend(self, make_backend: Callable[..., DatabaseBackend]) -> DatabaseBackend:
        return make_backend()


@pytest.mark.usefixtures("alias")
class TestSqlite(DatabaseEngineTCK):
    alias = "sqlite"
    pytestmark = on("sqlite")


@pytest.mark.usefixtures("alias")
class TestPostgresql(DatabaseEngineTCK):
    alias = "postgresql"
    pytestmark = on("postgresql")


@pytest.mark.usefixtures("alias")
class TestMysql(DatabaseEngineTCK):
    alias = "mysql"
    pytestmark = on("mysql")
