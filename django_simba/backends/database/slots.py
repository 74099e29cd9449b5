"""Turns for the calls of a process, served in order: a call never waits behind a later one.

The pool's connections (``max_connections`` for the callers, one more for the session) and
SQLite's one writer are handed out here. A plain lock or condition lets a thread arriving
as a turn frees take it before those already waiting: sixteen threads cycling locks then
keep some thread out for seconds, and a term granted after such a wait is born near its
deadline (it counts from when its request was sent). Here a freed turn goes straight to the
first waiter; a session call (open, keep-alive) joins the line at its head.
"""

from __future__ import annotations

import threading
from collections import deque


class _Waiter:
    __slots__ = ("granted", "wake")

    def __init__(self) -> None:
        self.wake = threading.Lock()
        self.wake.acquire()
        self.granted = False


class Slots:
    """``capacity`` turns, handed to waiters first come, first served (``first``: ahead of them)."""

    def __init__(self, capacity: int) -> None:
        self._lock = threading.Lock()
        self._free = capacity  # never above 0 while someone waits: a freed turn goes to a waiter
        self._line: deque[_Waiter] = deque()

    def take(self, wait: float, *, first: bool = False) -> bool:
        """A turn within ``wait`` seconds, or False."""
        with self._lock:
            if self._free:
                self._free -= 1
                return True
            waiter = _Waiter()
            if first:
                self._line.appendleft(waiter)
            else:
                self._line.append(waiter)
        if waiter.wake.acquire(timeout=max(0.0, wait)):
            return True
        with self._lock:
            if waiter.granted:  # handed over as it gave up: it is this call's after all
                return True
            self._line.remove(waiter)
            return False

    def give(self) -> None:
        """Give a turn back: to the first waiter, if any."""
        with self._lock:
            if self._line:
                waiter = self._line.popleft()
                waiter.granted = True
                waiter.wake.release()
            else:
                self._free += 1

    def waiting(self) -> int:
        with self._lock:
            return len(self._line)
