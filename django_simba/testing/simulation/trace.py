"""The last events of a run, kept cheaply and formatted only when someone reads them."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class Trace:
    """A ring of the last ``size`` events: (world time, who, message format, arguments)."""

    def __init__(self, size: int) -> None:
        self._events: deque[tuple[float, str, str, tuple[Any, ...]]] = deque(maxlen=max(1, size))
        self.recorded = 0

    def add(self, when: float, who: str, message: str, *args: Any) -> None:
        self._events.append((when, who, message, args))
        self.recorded += 1

    def lines(self) -> list[str]:
        return [
            f"{when:10.3f}  {who:<8} {message % args if args else message}"
            for when, who, message, args in self._events
        ]

    def __str__(self) -> str:
        return "\n".join(self.lines())


class _TraceHandler(logging.Handler):
    def __init__(self, trace: Trace, clock: Callable[[], float], who: Callable[[], str]) -> None:
        super().__init__(logging.INFO)
        self._trace, self._clock, self._who = trace, clock, who

    def emit(self, record: logging.LogRecord) -> None:
        self._trace.add(self._clock(), self._who(), "log: %s", record.getMessage())


@contextmanager
def engine_logs_into(trace: Trace, clock: Callable[[], float], who: Callable[[], str]) -> Iterator[None]:
    """Route django-simba's log lines into ``trace`` (and nowhere else) for the duration."""
    logger = logging.getLogger("django_simba")
    handler = _TraceHandler(trace, clock, who)
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
