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

from ..spi import LeaseBackend, redact
from .config import EngineConfig
from .observer import EngineObserver, Hook, call_hooks
from .outage import Outage
from .runtime import Outcome, Runtime

logger = logging.getLogger("django_simba.engine")


class Context:
    """The engine's shared parts; built anew (new mutex included) in a forked child."""

    def __init__(
        self,
        backend: LeaseBackend,
        config: EngineConfig,
        runtime: Runtime,
        observers: list[EngineObserver],
        pid: int,
    ) -> None:
        self.backend = backend
        self.config = config
        self.runtime = runtime
        self.observers = observers  # the engine's list: observers added later are seen here too
        #: The process whose threads use this context: every one of them checked it (or started here).
        self.pid = pid
        self.mutex = threading.RLock()
        self.now: Callable[[], float] = runtime.now  # the runtime's own: one call fewer, every read
        # what of an outage to log; a call on its way when it ends fails within the backend's timeout
        self.outage = Outage(runtime.now, f"the {backend.vendor} backend", stragglers_for=backend.timeout)
        self.last_error: BaseException | None = None

    def with_mutex(self, fn: Callable[..., None], *args: Any) -> None:
        """``fn(*args)`` with the mutex held: how a lane's reply or a timer reaches the engine's state."""
        with self.mutex:
            fn(*args)

    def notify_observers(self, hook: Hook, *args: object) -> None:
        """Tell the observers that listen (mutex held): inline ones now, the others in one callback."""
        later: list[EngineObserver] = []
        for observer in self.observers:
            if not observer.listens(hook):
                continue
            if observer.inline:
                call_hooks([observer], hook, args)
            else:
                later.append(observer)
        if later:
            self.runtime.run_callback(lambda: call_hooks(later, hook, args))

    def failed(self, error: BaseException | None, what: str) -> None:
        """A backend call failed (mutex held): remember it, and log what the outage is worth."""
        self.last_error = error
        log_outage(self.outage.failed(what))

    def answered(self) -> None:
        """The backend answered a call (mutex held)."""
        if self.outage.down:  # every acquire comes here: nothing to do but this look, mostly
            log_outage(self.outage.succeeded())


def log_outage(line: str | None) -> None:
    if line is not None:
        logger.warning("django-simba: %s", redact(line))


def ignore(outcome: Outcome[Any]) -> None:
    """For background calls whose failure changes nothing (the engine recovers by itself)."""
    if outcome.error is not None:
        logger.debug("django-simba: background call failed: %s", redact(outcome.error))
