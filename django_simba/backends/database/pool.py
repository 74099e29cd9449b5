"""The backend's own database connections, never the caller's.

Each call borrows a connection for its duration and gives it back, so a
thread's ``transaction.atomic()`` never contains a backend write, and many
threads (or short-lived request threads) share a few connections.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

from .dialects.base import Executor

logger = logging.getLogger(__name__)

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


class LinkPool:
    """Idle connections for reuse, and the busy ones tracked so ``close`` reaches them too."""

    def __init__(self, connect: Callable[[], Link], max_idle: int) -> None:
        self._connect = connect
        self._max_idle = max_idle
        self._lock = threading.Lock()
        self._idle: list[Link] = []
        self._busy: set[Link] = set()
        self._generation = 0

    def take(self) -> Link:
        with self._lock:
            if self._idle:
                link = self._idle.pop()
                link.reused = True
                self._busy.add(link)
                return link
            generation = self._generation
        link = self._connect()
        link.generation = generation
        with self._lock:
            self._busy.add(link)
        return link

    def give_back(self, link: Link) -> None:
        with self._lock:
            self._busy.discard(link)
            if link.generation == self._generation and len(self._idle) < self._max_idle:
                self._idle.append(link)
                return
        link.close()

    def discard(self, link: Link) -> None:
        with self._lock:
            self._busy.discard(link)
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
        for link in [*self._idle, *self._busy]:
            link.forget()
        self._idle, self._busy = [], set()
        self._generation += 1

    def count(self) -> int:
        with self._lock:
            return len(self._idle) + len(self._busy)
