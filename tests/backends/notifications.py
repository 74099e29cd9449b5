"""A notification listener that records when each notification arrived, for any backend's tests."""

from __future__ import annotations

import threading
import time

from django_simba.spi import Notification, NotificationKind


class Recorder:
    """A listener that stamps every notification with the monotonic time it arrived."""

    def __init__(self) -> None:
        self.events: list[tuple[float, NotificationKind, str]] = []
        self.arrived = threading.Condition()

    def __call__(self, event: Notification) -> None:
        with self.arrived:
            self.events.append((time.monotonic(), event.kind, event.name))
            self.arrived.notify_all()

    def saw(self, kind: NotificationKind, name: str = "") -> bool:
        with self.arrived:
            return any(k is kind and n == name for _, k, n in self.events)

    def first(self, kind: NotificationKind, name: str, after: float, timeout: float = 5.0) -> float:
        """The arrival (``time.monotonic()``) of the first ``kind`` of ``name`` at or after ``after``."""

        def found() -> float | None:
            return next((t for t, k, n in self.events if k is kind and n == name and t >= after), None)

        with self.arrived:
            if not self.arrived.wait_for(lambda: found() is not None, timeout):
                raise AssertionError(f"no {kind.value} of {name!r} within {timeout} s")
            stamp = found()
            assert stamp is not None
            return stamp
