"""The engine TCK on PostgreSQL, MariaDB and SQLite; each engine has a backend of its own."""

from __future__ import annotations

import pytest

from django_simba.testing import EngineTCK

from .conftest import BackendEach, on


class DatabaseEngineTCK(BackendEach, EngineTCK):
    alias: str


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
