"""Waiting on conditions with deadlines, never on sleeps that hope."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T | None],
    timeout: float,
    *,
    interval: float = 0.01,
    message: str = "condition",
) -> T:
    """Poll ``condition`` until it returns a truthy value, and return it; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message} not met within {timeout:.2f} s")
        time.sleep(interval)
