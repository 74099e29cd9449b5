"""The backend connects where its alias points at each call, not where it pointed when it was built.

A test runner switches an alias to its test database after the apps are loaded: a backend built
before (at import, by an engine started early) must take its locks in the test database.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connections

from django_simba.backends.database import AnyDatabaseBackend
from django_simba.spi import ConfigurationError, SessionExpired

from .conftest import on

pytestmark = on("sqlite")


@pytest.fixture
def other_file(tmp_path: Path) -> Path:
    """A second SQLite file with the tables (a copy of the test database's schema and rows)."""
    target = tmp_path / "other.sqlite3"
    source = sqlite3.connect(connections.settings["sqlite"]["NAME"])
    copy = sqlite3.connect(target)
    try:
        source.backup(copy)
    finally:
        source.close()
        copy.close()
    return target


@pytest.fixture
def repoint() -> Iterator[None]:
    """Puts the alias's NAME back after the test moved it."""
    saved = connections.settings["sqlite"]["NAME"]
    yield
    connections.settings["sqlite"]["NAME"] = saved


def sessions_in(path: str | Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT session_id FROM simba_session")}


def test_a_backend_built_earlier_follows_the_alias_to_its_new_database(
    other_file: Path, repoint: None
) -> None:
    first = connections.settings["sqlite"]["NAME"]
    backend = AnyDatabaseBackend.build({"alias": "sqlite"}, timeout=5)
    try:
        before = backend.open_session(30, "before").session_id
        assert backend.connection_count() == 1  # an idle connection to the first file
        connections.settings["sqlite"]["NAME"] = str(other_file)

        after = backend.open_session(30, "after").session_id
        assert backend.acquire(after, "follow.me") is not None
        assert after in sessions_in(other_file)
        assert after not in sessions_in(first)
        assert backend.connection_count() == 1  # the one to the first file was closed
        with pytest.raises(SessionExpired):  # that session lives in the other database
            backend.keep_alive(before, 30)
    finally:
        backend.close()


@pytest.mark.postgresql  # its driver: the alias is repointed at PostgreSQL's engine
def test_another_engine_under_the_alias_is_refused(repoint: None) -> None:
    backend = AnyDatabaseBackend.build({"alias": "sqlite"}, timeout=5)
    saved = dict(connections.settings["sqlite"])
    try:
        connections.settings["sqlite"]["ENGINE"] = "django.db.backends.postgresql"
        with pytest.raises(ConfigurationError, match="changed its ENGINE"):
            backend.open_session(30, "x")
    finally:
        connections.settings["sqlite"].update(saved)
        backend.close()
