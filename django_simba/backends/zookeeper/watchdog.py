"""The local watchdog: heartbeats alone never keep a lease.

kazoo pings the server on its own, so a ZooKeeper session outlives a process whose keep-alive
thread is stuck. One daemon thread per backend ends every session whose ``renew_by`` (last
renewal + lease) has passed; closing it makes the server delete its lease and member nodes at
once, so candidates take over without waiting for a session timeout.
"""

from __future__ import annotations

import threading
from typing import Protocol

from ...spi.clock import local_clock

#: The wait below runs on Python's monotonic clock, which stops while the host is suspended: look
#: at the local clock at least this often, so a session overdue after a resume ends soon after it.
LOOK_AT_LEAST_EVERY = 1.0


class Watched(Protocol):
    renew_by: float

    @property
    def ended(self) -> bool: ...

    def end_if_overdue(self, now: float) -> bool: ...


class Watchdog:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._sessions: set[Watched] = set()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def watch(self, session: Watched) -> None:
        with self._changed:
            self._sessions.add(session)
            if self._thread is None:
                self._stopping = False
                self._thread = threading.Thread(target=self._run, name="simba-zk-watchdog", daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def forget(self, session: Watched) -> None:
        with self._changed:
            self._sessions.discard(session)

    def stop(self) -> None:
        with self._changed:
            thread, self._thread = self._thread, None
            self._stopping = True
            self._sessions.clear()
            self._changed.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(1.0)

    def _run(self) -> None:
        with self._changed:
            while not self._stopping:
                now = local_clock()
                for session in list(self._sessions):
                    if session.ended or session.end_if_overdue(now):
                        self._sessions.discard(session)
                wake_at = min((session.renew_by for session in self._sessions), default=None)
                # a renewal only moves renew_by later: waking at the old time and looking again is enough
                wait = None if wake_at is None else max(0.001, wake_at - local_clock())
                self._changed.wait(None if wait is None else min(wait, LOOK_AT_LEAST_EVERY))
