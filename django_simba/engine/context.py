"""What every part of the engine shares: the backend, the timings, the runtime, one mutex.

The engine is a facade over a few parts (the session keeper, the lines of names, group
membership), each with one job. They share this context: one re-entrant mutex guards all
of their state, so a completion on a lane can update several parts at once. Blocking
backend calls never run under it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ..spi import LeaseBackend
from .config import EngineConfig
from .observer import EngineObserver
from .outage import Outage
from .runtime import Outcome, Runtime

logger = logging.getLogger("django_simba.engine")


class Context:
    """The engine's shared parts; built anew (new mutex included) in a forked child."""

    def __init__(
        self, backend: LeaseBackend, config: EngineConfig, runtime: Runtime, observers: list[EngineObserver]
    ) -> None:
        self.backend = backend
        self.config = config
        self.runtime = runtime
        self.observers = observers  # the engine's list: observers added later are seen here too
        self.mutex = threading.RLock()
        self.outage = Outage(runtime.now, f"the {backend.vendor} backend")  # what of an outage to log
        self.last_error: BaseException | None = None

    def now(self) -> float:
        return self.runtime.now()

    def notify_observers(self, hook: Callable[[EngineObserver], Any]) -> None:
        for observer in self.observers:
            self.runtime.run_callback(lambda observer=observer: hook(observer))  # type: ignore[misc]

    def failed(self, error: BaseException | None, what: str) -> None:
        """A backend call failed (mutex held): remember it, and log what the outage is worth."""
        self.last_error = error
        log_outage(self.outage.failed(what))

    def answered(self) -> None:
        """The backend answered a call (mutex held)."""
        log_outage(self.outage.succeeded())


def log_outage(line: str | None) -> None:
    if line is not None:
        logger.warning("django-simba: %s", line)


def ignore(outcome: Outcome[Any]) -> None:
    """For background calls whose failure changes nothing (the engine recovers by itself)."""
    if outcome.error is not None:
        logger.debug("django-simba: background call failed: %s", outcome.error)
