"""What an election is bound to while ``settings.SIMBA`` is invalid: it waits there, and never leads.

A handle made while the application loads must not stop the process that made it:
an election started in ``AppConfig.ready()`` with a typo in ``SIMBA`` would turn
``manage.py check`` into a traceback (instead of the check report) and make every
gunicorn worker fail to boot. So :func:`django_simba.election` binds the candidacy to
an :class:`Unconfigured` port instead: the candidacy is kept, ``is_leader`` stays
False, and everything that needs the backend raises the settings' error, which the
system checks (and a serving process's start-up log) report with its id. Fix the
settings and restart the process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, TypeVar

from .errors import ConfigurationError

if TYPE_CHECKING:
    from .engine import EndReason, Term
    from .engine.config import EngineConfig
    from .engine.contender import Contender
    from .engine.runtime import Outcome, Runtime, Timer
    from .spi import LeaseBackend, LeaseInfo, Member, Notification

T = TypeVar("T")


class Unconfigured:
    """A port (``django_simba.engine.Port``) with no engine behind it: candidacies wait, the rest raises."""

    def __init__(self, error: ConfigurationError) -> None:
        self.error = error
        self._mutex = threading.RLock()
        self._kept: list[Contender] = []

    def _refuse(self) -> NoReturn:
        raise ConfigurationError(str(self.error)) from self.error

    # -- what a waiting candidacy uses -------------------------------------------------------

    @property
    def mutex(self) -> threading.RLock:
        return self._mutex

    @property
    def closed(self) -> bool:
        return False

    @property
    def session_id(self) -> str | None:
        return None

    def park_for_fork(self, contender: Contender) -> bool:
        self._kept.append(contender)
        return True

    def enqueue(self, contender: Contender, *, delay: float | None = None) -> None:
        if contender not in self._kept:
            self._kept.append(contender)

    def withdraw(self, contender: Contender) -> None:
        self._kept = [kept for kept in self._kept if kept is not contender]

    def start(self) -> object:
        return self  # nothing to start: there is no backend

    # -- everything else needs the backend ----------------------------------------------------

    @property
    def backend(self) -> LeaseBackend:
        self._refuse()

    @property
    def config(self) -> EngineConfig:
        self._refuse()

    @property
    def runtime(self) -> Runtime:
        self._refuse()

    def now(self) -> float:
        self._refuse()

    def wait_for_session(self, timeout: float | None) -> str:
        self._refuse()

    def when_session(self, callback: Callable[[str | None], None]) -> None:
        self._refuse()

    def forget_session_waiter(self, callback: Callable[[str | None], None]) -> None:
        return None

    def no_session(self) -> Exception:
        return ConfigurationError(str(self.error))

    def acquire_now(self, contender: Contender, session_wait: float | None) -> BaseException | None:
        self._refuse()

    def make_lent_attempt(self, contender: Contender, session_id: str) -> BaseException | None:
        self._refuse()

    def release_now(self, contender: Contender, term: Term) -> EndReason:
        self._refuse()

    def release_later(self, contender: Contender, term: Term, reason: EndReason) -> None:
        self._refuse()

    def join(self, group: str, session_wait: float | None) -> None:
        self._refuse()

    def leave(self, group: str) -> None:
        self._refuse()

    def members(self, group: str) -> list[Member]:
        self._refuse()

    def add_notification_listener(self, listener: Callable[[Notification], None]) -> None:
        return None

    def remove_notification_listener(self, listener: Callable[[Notification], None]) -> None:
        return None

    def owner(self, name: str) -> LeaseInfo | None:
        self._refuse()

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        self._refuse()

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer:
        self._refuse()

    def run_callback(self, fn: Callable[[], None]) -> None:
        self._refuse()

    def submit(self, call: Callable[[], T], on_done: Callable[[Outcome[T]], None]) -> None:
        self._refuse()
