"""How the SQLite backend waits for the database's one write lock, held by another connection.

SQLite's own busy handler sleeps longer and longer (up to 100 ms a time) and its lock has no
queue, so a process that found the lock taken a few times looked so rarely that processes
cycling a lock kept it (least / most 0.00 in the contended benchmark). The backend waits
itself, looking again every few milliseconds at most, until the call's timeout.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from django_simba.backends.database import DatabaseBackend, sqlite
from django_simba.spi import BackendTimeout, Grant
from django_simba.testing import wait_until

from .conftest import Outsider, on

pytestmark = on("sqlite")
alias = pytest.fixture(lambda: "sqlite")


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every pause the SQLite executor makes while it waits for the lock."""
    made: list[float] = []

    def recorded(seconds: float) -> None:
        made.append(seconds)
        time.sleep(seconds)

    monkeypatch.setattr(sqlite, "time", SimpleNamespace(monotonic=time.monotonic, sleep=recorded))
    return made


def test_sqlites_own_busy_handler_is_off(backend: DatabaseBackend) -> None:
    backend.open_session(30, "busy handler")
    (link,) = backend._pool._idle
    assert link.raw.execute("PRAGMA busy_timeout").fetchone() == (0,)


def test_a_waiting_acquire_looks_again_every_few_milliseconds(
    backend: DatabaseBackend, outsider: Outsider, pauses: list[float]
) -> None:
    session = backend.open_session(30, "waiting").session_id
    outcome: list[Any] = []
    outsider.begin()  # another connection takes the write lock
    try:
        waiting = threading.Thread(target=lambda: outcome.append(backend.acquire(session, "wait.here")))
        waiting.start()
        wait_until(lambda: len(pauses) >= 100, 10, message="a hundred tries")
    finally:
        outsider.rollback()
    waiting.join(10)
    assert isinstance(outcome[0], Grant)
    assert max(pauses) <= sqlite.LAST_PAUSE * 1.5


def test_the_wait_ends_at_the_calls_timeout(make_backend: Any, outsider: Outsider) -> None:
    backend = make_backend(timeout=0.5)
    session = backend.open_session(30, "gives up").session_id
    outsider.begin()
    try:
        with pytest.raises(BackendTimeout):
            backend.acquire(session, "never.free")
    finally:
        outsider.rollback()
    assert backend.acquire(session, "never.free") is not None
