"""The interfaces every benchmarked subject is adapted to.

A *lock client* is one process's handle on one lock name; a *candidate* is one
process's candidacy in one election; a *holder* is one session holding many
leases. Each adapter module exposes factories ``make_lock(env, name, ttl)``,
``make_candidate(env, name, ttl)`` or ``make_holder(env, ttl)``, named in
``benchmarks/targets.py``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

#: What the harness knows of the servers: URLs, hosts, ports (see ``benchmarks/environment.py``).
Env = dict[str, Any]


class LockClient(Protocol):
    def acquire(self, timeout: float | None) -> bool:
        """0: one try; None: block the way the subject blocks by default; else wait that long."""

    def release(self) -> None: ...

    def close(self) -> None: ...


class Candidate(Protocol):
    def start(self, on_elected: Callable[[], None]) -> None:
        """Begin contending; ``on_elected`` runs (in any thread) when this candidate leads."""

    def stand_down(self) -> None:
        """The clean way for a leader to give up leadership."""

    def close(self) -> None: ...


class Holder(Protocol):
    def hold(self, names: list[str]) -> None:
        """Acquire every name (as one session)."""

    def keep_alive(self) -> None:
        """One renewal of the session and everything it holds."""

    def close(self) -> None: ...


def int64_key(name: str) -> int:
    """A stable signed 64-bit key for ``name`` (advisory locks take integers)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


def poll_until(attempt: Callable[[], bool], timeout: float | None, interval: float = 0.001) -> bool:
    """Retry ``attempt`` until it succeeds or ``timeout`` passes (for subjects with no blocking form)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if attempt():
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(interval)


class LockCandidate:
    """An election built from a lock client, for subjects that only have locks.

    A thread blocks on the lock the subject's default way (``acquire(None)``);
    once it has it, this candidate leads until :meth:`stand_down` releases it.
    """

    def __init__(self, lock: LockClient) -> None:
        self.lock = lock
        self._stop = threading.Event()
        self._held = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, on_elected: Callable[[], None]) -> None:
        def contend() -> None:
            if self.lock.acquire(None) and not self._stop.is_set():
                self._held.set()
                on_elected()

        self._thread = threading.Thread(target=contend, name="bench-candidate", daemon=True)
        self._thread.start()

    def stand_down(self) -> None:
        self._stop.set()
        if self._held.is_set():
            self._held.clear()
            self.lock.release()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._held.is_set():
            self.lock.release()
        self.lock.close()
