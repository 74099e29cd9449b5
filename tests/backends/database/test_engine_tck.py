"""The engine TCK on PostgreSQL, MariaDB and SQLite; each engine has a backend of its own.

Until the database backend's release says whether the term was still held (it answers with a
bool today), the tests that need that answer are expected to fail: strictly, so that the day it
answers with ``Released(held=..., contended=...)`` these marks fail and go.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from django_simba.backends.database import DatabaseBackend
from django_simba.engine import Engine
from django_simba.spi import LeaseBackend
from django_simba.testing import EngineTCK

from .conftest import on

RELEASE_SAYS_NOTHING = pytest.mark.xfail(
    strict=True,
    reason="the database backend's _release returns a bool, not Released(held=..., contended=...)",
)


class DatabaseEngineTCK(EngineTCK):
    alias: str

    @pytest.fixture
    def backend(self, make_backend: Callable[..., DatabaseBackend]) -> DatabaseBackend:
        return make_backend()

    @pytest.fixture
    def other_backend(self, make_backend: Callable[..., DatabaseBackend]) -> DatabaseBackend:
        return make_backend()

    @RELEASE_SAYS_NOTHING
    def test_a_release_says_the_live_term_was_held(self, backend: LeaseBackend, name: str) -> None:
        super().test_a_release_says_the_live_term_was_held(backend, name)

    @RELEASE_SAYS_NOTHING
    def test_a_release_after_a_force_release_says_the_term_was_gone(
        self, backend: LeaseBackend, name: str
    ) -> None:
        super().test_a_release_after_a_force_release_says_the_term_was_gone(backend, name)

    @RELEASE_SAYS_NOTHING
    def test_a_release_after_the_session_expired_says_the_term_was_gone(
        self, backend: LeaseBackend, other_backend: LeaseBackend, name: str
    ) -> None:
        super().test_a_release_after_the_session_expired_says_the_term_was_gone(backend, other_backend, name)

    @RELEASE_SAYS_NOTHING
    def test_a_release_after_an_operator_force_released_the_name_raises_lease_lost(
        self, backend: LeaseBackend, make_engine: Callable[..., Engine], name: str
    ) -> None:
        super().test_a_release_after_an_operator_force_released_the_name_raises_lease_lost(
            backend, make_engine, name
        )


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
