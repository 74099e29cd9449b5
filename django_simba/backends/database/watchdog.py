"""A deadline for every database call, enforced from outside the calling thread.

Statement and lock timeouts on the server end most slow calls. They cannot end
a call stuck on a dead network or a server that stopped answering: the watchdog
interrupts such a call (shuts its socket down) so it fails within its deadline.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Alarm:
    deadline: float
    interrupt: Callable[[], None]
    fired: bool = False


class Guard:
    """One guarded call: its alarm armed on entry and disarmed on exit.

    A class rather than a generator-based context manager: every database call makes one,
    and this costs half as much.
    """

    __slots__ = ("_key", "_watchdog", "alarm")

    def __init__(self, watchdog: Watchdog, alarm: Alarm) -> None:
        self._watchdog = watchdog
        self._key = -1
        self.alarm = alarm

    def __enter__(self) -> Alarm:
        self._key = self._watchdog._arm(self.alarm)
        return self.alarm

    def __exit__(self, *exc_info: object) -> None:
        self._watchdog._disarm(self._key)


class Watchdog:
    """One daemon thread that interrupts calls still running at their deadline.

    An interrupt runs under the watchdog's lock and a guarded call disarms under
    the same lock, so an interrupt never reaches a call that already finished.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        # The hot paths (arm, disarm) take the condition's lock directly: no Python frame.
        self._mutex = threading.RLock()
        self._condition = threading.Condition(self._mutex)
        self._alarms: dict[int, Alarm] = {}
        self._keys = itertools.count()
        self._wake_at = math.inf
        self._thread: threading.Thread | None = None
        self._stopping = False

    def guard(self, seconds: float, interrupt: Callable[[], None]) -> Guard:
        """A context manager running its block with ``interrupt`` armed to fire after ``seconds``."""
        return Guard(self, Alarm(time.monotonic() + seconds, interrupt))

    def _arm(self, alarm: Alarm) -> int:
        key = next(self._keys)
        with self._mutex:
            if self._thread is None:
                self._stopping = False
                self._thread = threading.Thread(target=self._watch, name="simba-db-watchdog", daemon=True)
                self._thread.start()
            self._alarms[key] = alarm
            if alarm.deadline < self._wake_at:
                self._condition.notify()
        return key

    def _disarm(self, key: int) -> None:
        with self._mutex:
            self._alarms.pop(key, None)

    def _watch(self) -> None:
        try:
            self._watch_alarms()
        finally:
            with self._condition:  # started again by the next call, should it ever end unasked
                if self._thread is threading.current_thread():
                    self._thread = None

    def _watch_alarms(self) -> None:
        with self._condition:
            while not self._stopping:
                now = time.monotonic()
                for key, alarm in list(self._alarms.items()):
                    if alarm.deadline <= now:
                        del self._alarms[key]
                        alarm.fired = True
                        try:
                            alarm.interrupt()
                        except Exception:  # the call fails on its own; nothing else to do
                            logger.exception("interrupting a database call failed")
                self._wake_at = min((alarm.deadline for alarm in self._alarms.values()), default=math.inf)
                self._condition.wait(None if self._wake_at == math.inf else self._wake_at - now)

    def stop(self) -> None:
        with self._condition:
            self._stopping = True
            self._condition.notify()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    def after_fork(self) -> None:
        """The thread and lock of the parent are not ours: start afresh."""
        self._reset()
