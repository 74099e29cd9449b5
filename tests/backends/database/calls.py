"""A backend call run in a thread of its own, and the wait until it is blocked on a row lock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django_simba.testing import wait_until

from .conftest import Outsider


class Call:
    """A backend call running in a thread; ``result()`` joins it and re-raises its error."""

    def __init__(self, function: Callable[[], Any]) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(function,), daemon=True)
        self._thread.start()

    def _run(self, function: Callable[[], Any]) -> None:
        try:
            self._value = function()
        except BaseException as error:
            self._error = error

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self, timeout: float = 10) -> Any:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the call did not return"
        if self._error is not None:
            raise self._error
        return self._value


def wait_blocked(outsider: Outsider, call: Call) -> None:
    """Wait until ``call`` waits for a row lock (SQLite cannot tell: it waits on the file lock)."""
    if outsider.vendor == "sqlite":
        return
    wait_until(lambda: outsider.lock_waiters() > 0, 5, message="the call to wait for the lock")
    assert not call.done
