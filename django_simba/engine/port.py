"""The engine as its contenders see it: a small port, not the engine's insides.

Locks, elections and groups (sync and async alike) are written against this protocol;
:class:`~django_simba.engine.Engine` implements it. Methods marked "mutex held" must be
called inside ``with port.mutex``; the others take it themselves and may block.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from ..spi import LeaseBackend, LeaseInfo, Member, Notification
    from .config import EngineConfig
    from .contender import Contender
    from .runtime import Outcome, Runtime, Timer
    from .term import EndReason, Term

T = TypeVar("T")


class Port(Protocol):
    @property
    def mutex(self) -> threading.RLock:
        """Guards the engine's state and every contender's hooks."""
        ...

    @property
    def backend(self) -> LeaseBackend: ...

    @property
    def config(self) -> EngineConfig: ...

    @property
    def runtime(self) -> Runtime: ...

    @property
    def closed(self) -> bool: ...

    @property
    def session_id(self) -> str | None: ...

    def now(self) -> float: ...

    def start(self) -> object:
        """Start the engine's threads and open a session (idempotent)."""
        ...

    # -- sessions --------------------------------------------------------------------------

    def wait_for_session(self, timeout: float | None) -> str:
        """Block until a session is live; BackendUnavailable after ``timeout``, EngineClosed."""
        ...

    def when_session(self, callback: Callable[[str | None], None]) -> None:
        """Call ``callback(session_id)`` once one is live (``None``: the engine closed); no blocking."""
        ...

    def forget_session_waiter(self, callback: Callable[[str | None], None]) -> None: ...

    def no_session(self) -> Exception:
        """The error of a caller that waited for a session in vain."""
        ...

    # -- the line of a name ----------------------------------------------------------------

    def enqueue(self, contender: Contender, *, delay: float | None = None) -> None:
        """Put ``contender`` in line for its name (mutex held)."""
        ...

    def withdraw(self, contender: Contender) -> None:
        """Take ``contender`` out of line (mutex held)."""
        ...

    def acquire_now(self, contender: Contender, session_wait: float | None) -> BaseException | None:
        """One attempt in the calling thread, else in line; the attempt's error, if any."""
        ...

    def make_lent_attempt(self, contender: Contender, session_id: str) -> BaseException | None:
        """Make the attempt the engine lent to ``contender``'s own thread."""
        ...

    def release_now(self, contender: Contender, term: Term) -> EndReason:
        """End ``term`` and free its name, in the calling thread; how the term ended."""
        ...

    def release_later(self, contender: Contender, term: Term, reason: EndReason) -> None:
        """End ``term`` now for ``reason`` and free its name from the engine's lane (mutex held)."""
        ...

    def park_for_fork(self, contender: Contender) -> bool:
        """In a process that serves nothing: keep a candidacy for forked children (mutex held)."""
        ...

    # -- groups ----------------------------------------------------------------------------

    def join(self, group: str, session_wait: float | None) -> None: ...

    def leave(self, group: str) -> None: ...

    def members(self, group: str) -> list[Member]: ...

    def add_notification_listener(self, listener: Callable[[Notification], None]) -> None: ...

    def remove_notification_listener(self, listener: Callable[[Notification], None]) -> None: ...

    # -- scheduling ------------------------------------------------------------------------

    def owner(self, name: str) -> LeaseInfo | None: ...

    def leases(self, prefix: str = "") -> list[LeaseInfo]: ...

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer: ...

    def run_callback(self, fn: Callable[[], None]) -> None: ...

    def submit(self, call: Callable[[], T], on_done: Callable[[Outcome[T]], None]) -> None:
        """Run a blocking call on the engine's contend lane, then ``on_done`` with its outcome."""
        ...
