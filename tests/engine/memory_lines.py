"""The in-memory backend on a hand-set clock, and a name with a holder and a waiter in its line."""

from __future__ import annotations

from typing import Any

from django_simba.backends.memory import MemoryBackend
from django_simba.spi import Notification
from tests.clocks import Clock

#: The sessions' lease, in the clock's seconds.
LEASE = 10.0


def backend_on(clock: Clock, kind: type[MemoryBackend] = MemoryBackend, **options: Any) -> MemoryBackend:
    return kind(timeout=5, clock=clock, **options)


def heard(backend: MemoryBackend) -> list[Notification]:
    seen: list[Notification] = []
    backend.subscribe(seen.append)
    return seen


def holder_and_waiter(backend: MemoryBackend) -> tuple[str, str, int]:
    """Two sessions: one holds ``x`` (with the token returned), the other waits in its line."""
    holder, waiter = (backend.open_session(LEASE, n).session_id for n in ("h", "w"))
    grant = backend.acquire(holder, "x")
    assert grant is not None and backend.acquire(waiter, "x", wait=True) is None
    return holder, waiter, grant.token
