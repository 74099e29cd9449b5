"""The backend's own database connections, never the caller's.

Each call borrows a connection for its duration and gives it back, so a
thread's ``transaction.atomic()`` never contains a backend write, and many
threads (or short-lived request threads) share a few connections. The callers'
calls have at most ``max_open`` connections at once: a call finding them all
busy waits for one, as long as its caller may wait. The session's calls (open,
keep-alive) are not among them: they have ``RESERVED`` more, so a keep-alive
never waits behind the callers' work, however busy the process is (it would
otherwise wait past the session's deadline and end every term of the process).
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

from ...spi import format_duration
from .dialect import Executor
from .slots import Slots

logger = logging.getLogger(__name__)

#: How long a connection beyond ``max_idle`` stays open idle (closed at the next call after it).
SURPLUS_GRACE = 10.0
#: Connections for the session's calls on top of the callers' ``max_open``: one keep-alive at a time.
RESERVED = 1

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
    #: Taken by a session call, counted against ``RESERVED`` rather than the callers' ``max_open``.
    session: bool = False

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
    """Idle connections for reuse, and the busy ones tracked so ``close`` reaches them too.

    Two kinds of calls share the idle connections but take turns apart (:mod:`.slots`): the
    callers' (``max_open`` connections busy or opening at most) and the session's
    (``RESERVED``). So the session's calls wait only for each other, never for a caller's
    connection, and the callers' wait in the order they came.
    """

    def __init__(self, connect: Callable[[], Link], max_idle: int, max_open: int) -> None:
        self._connect = connect
        self._max_idle = max_idle
        self._max_open = max_open
        self._lock = threading.Lock()
        self._turns = {False: Slots(max_open), True: Slots(RESERVED)}
        self._idle: list[Link] = []
        self._busy: set[Link] = set()
        self._generation = 0
        self.surplus_grace = SURPLUS_GRACE

    def take(self, wait: float, *, session: bool = False) -> Link:
        """An idle connection, or a new one; with all of its kind in use, wait up to ``wait`` seconds.

        ``session``: a call of the session (open, keep-alive), which has connections of its own.
        """
        turns = self._turns[session]
        if not turns.take(wait):
            raise PoolExhausted(_exhausted(session, self._max_open, wait))
        with self._lock:
            if self._idle:
                link = self._idle.pop()  # the last used: the others may age out
                link.reused = True
                link.session = session
                self._busy.add(link)
                surplus = self._surplus()
            else:
                generation = self._generation
                surplus = None
        if surplus is not None:
            _close_all(surplus)
            return link
        try:
            link = self._connect()
        except BaseException:
            turns.give()
            raise
        link.generation = generation
        link.session = session
        with self._lock:
            self._busy.add(link)
        return link

    def give_back(self, link: Link) -> None:
        with self._lock:
            self._busy.discard(link)
            if link.generation != self._generation:
                surplus = [link]
            else:
                link.idle_since = time.monotonic()
                self._idle.append(link)
                surplus = self._surplus()
        self._turns[link.session].give()  # after it is idle: the next call takes this one
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
        self._turns[link.session].give()
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
        self._lock = threading.Lock()
        self._turns = {False: Slots(self._max_open), True: Slots(RESERVED)}
        for link in [*self._idle, *self._busy]:
            link.forget()
        self._idle, self._busy = [], set()
        self._generation += 1

    def count(self) -> int:
        with self._lock:
            return len(self._idle) + len(self._busy)

    def waiting(self, *, session: bool = False) -> int:
        """Calls of the kind waiting for a connection now (all of the kind's in use)."""
        return self._turns[session].waiting()


def _exhausted(session: bool, limit: int, wait: float) -> str:
    waited = format_duration(wait)
    if session:
        return f"the session's connection stayed busy for the {waited} the call could wait"
    return f"all {limit} connections (max_connections) stayed busy for the {waited} the call could wait"


def _close_all(links: list[Link]) -> None:
    for link in links:
        link.close()
