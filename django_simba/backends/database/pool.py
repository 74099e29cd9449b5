"""The backend's own database connections, never the caller's.

Each call borrows a connection for its duration and gives it back, so a
thread's ``transaction.atomic()`` never contains a backend write, and many
threads (or short-lived request threads) share a few connections. At most
``max_open`` are open at once: a call finding them all busy waits for one.
Connections beyond ``max_idle`` close once they have been idle for
``SURPLUS_GRACE``, so a burst does not open and close one per overlap.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

from .dialects.base import Executor

logger = logging.getLogger(__name__)

#: How long a connection beyond ``max_idle`` stays open idle (closed at the next call after it).
SURPLUS_GRACE = 10.0

#: Connections inherited through ``fork``: kept referenced forever, because closing or
#: even collecting one in the child would end the parent's session on the server.
_INHERITED: list[Any] = []


@dataclass(eq=False, slots=True)
class Link:
    """One connection of the backend: Django's wrapper and an executor on its DB-API connection."""

    wrapper: BaseDatabaseWrapper
    executor: Executor
    #: Ends a call blocked on this connection, from another thread.
    interrupt: Callable[[], None] = lambda: None
    generation: int = 0
    reused: bool = False
    idle_since: float = 0.0

    @property
    def raw(self) -> Any:
        return self.wrapper.connection

    def close(self) -> None:
        raw, self.wrapper.connection = self.wrapper.connection, None
        if raw is None:
            return
        try:
            raw.close()
        except Exception:  # already broken: nothing to release
            logger.debug("closing a database connection failed", exc_info=True)

    def forget(self) -> None:
        """Drop the connection without touching it (after fork)."""
        _INHERITED.append(self.wrapper.connection)
        self.wrapper.connection = None


class PoolExhausted(Exception):
    """Every connection stayed busy for as long as the call could wait."""


class LinkPool:
    """Idle connections for reuse, and the busy ones tracked so ``close`` reaches them too."""

    def __init__(self, connect: Callable[[], Link], max_idle: int, max_open: int) -> None:
        self._connect = connect
        self._max_idle = max_idle
        self._max_open = max_open
        self._mutex, self._lock = _condition()
        self._idle: list[Link] = []
        self._busy: set[Link] = set()
        self._opening = 0  # connections being opened, counted against max_open
        self._waiting = 0  # calls waiting for a connection
        self._generation = 0
        self.surplus_grace = SURPLUS_GRACE

    def take(self, wait: float) -> Link:
        """An idle connection, or a new one; with ``max_open`` busy, wait up to ``wait`` seconds."""
        deadline = None
        with self._mutex:  # the condition's own lock: ``with`` on it costs no Python frame
            while not self._idle and len(self._busy) + self._opening >= self._max_open:
                if deadline is None:
                    deadline = time.monotonic() + wait
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise PoolExhausted(f"all {self._max_open} connections stayed busy for {wait:g} s")
                self._waiting += 1
                try:
                    self._lock.wait(remaining)
                finally:
                    self._waiting -= 1
            if self._idle:
                link = self._idle.pop()  # the last used: the others may age out
                link.reused = True
                self._busy.add(link)
                surplus = self._surplus()
            else:
                self._opening += 1
                generation = self._generation
                surplus = None
        if surplus is not None:
            _close_all(surplus)
            return link
        try:
            link = self._connect()
        except BaseException:
            with self._lock:
                self._opening -= 1
                self._lock.notify()
            raise
        link.generation = generation
        with self._lock:
            self._opening -= 1
            self._busy.add(link)
        return link

    def give_back(self, link: Link) -> None:
        with self._mutex:
            self._busy.discard(link)
            if self._waiting:
                self._lock.notify()
            if link.generation != self._generation:
                surplus = [link]
            else:
                link.idle_since = time.monotonic()
                self._idle.append(link)
                surplus = self._surplus()
        _close_all(surplus)

    def _surplus(self) -> list[Link]:
        """Idle connections beyond ``max_idle`` that stayed idle too long, out of the pool (lock held)."""
        if len(self._idle) <= self._max_idle:
            return []
        cutoff = time.monotonic() - self.surplus_grace
        surplus = []
        while len(self._idle) > self._max_idle and self._idle[0].idle_since <= cutoff:
            surplus.append(self._idle.pop(0))  # the oldest first: the list is in order of return
        return surplus

    def discard(self, link: Link) -> None:
        with self._lock:
            self._busy.discard(link)
            self._lock.notify()
        link.close()

    def drop_idle(self) -> None:
        """Close every idle connection: one was found dead, its siblings likely are too."""
        with self._lock:
            idle, self._idle = self._idle, []
        for link in idle:
            link.close()

    def close(self) -> None:
        """Close idle connections now and busy ones when they come back."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._generation += 1
        for link in idle:
            link.close()

    def after_fork(self) -> None:
        """Forget every connection inherited from the parent, without closing any."""
        self._mutex, self._lock = _condition()
        for link in [*self._idle, *self._busy]:
            link.forget()
        self._idle, self._busy = [], set()
        self._opening = self._waiting = 0
        self._generation += 1

    def count(self) -> int:
        with self._lock:
            return len(self._idle) + len(self._busy)

    def waiting(self) -> int:
        """Calls waiting for a connection now (all ``max_open`` busy)."""
        with self._lock:
            return self._waiting


def _condition() -> tuple[threading.RLock, threading.Condition]:
    """A condition and its lock, which the hot paths take directly (the same lock)."""
    mutex = threading.RLock()
    return mutex, threading.Condition(mutex)


def _close_all(links: list[Link]) -> None:
    for link in links:
        link.close()
