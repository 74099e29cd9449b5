"""A clock that a test sets by hand (``clock.now += 5``): for code that takes a clock function."""

from __future__ import annotations


class Clock:
    """Reads ``now``; starts at 100 s, so that no time is 0."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now
