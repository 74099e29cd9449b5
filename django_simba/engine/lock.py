"""Locks: a blocking, exclusive term on a name, renewed by the session while held.

A :class:`Lock` is **not re-entrant**: acquiring a lock that the same thread already
holds raises :class:`LockHeld` instead of deadlocking. Several threads may share one
``Lock`` object (the others wait), or each make their own for the same name; either way,
two threads never hold the name at once, and every holder gets a term with a new, higher
token. :class:`~.alock.AsyncLock` is the same lock for coroutines: both are built on
:class:`LockBase`, so their checks, timeouts, maximum hold and loss reports cannot drift.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from types import EllipsisType, TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ..errors import ConfigurationError, EngineClosed, LeaseLost, LeaseNotHeld, LockHeld, LockTimeout
from ..spi import validate_name
from .contender import Contender
from .term import EndReason, Term
from .waiters import ThreadWaiter, Waiter

if TYPE_CHECKING:
    from .port import Port
    from .runtime import Timer

P = ParamSpec("P")
R = TypeVar("R")

logger = logging.getLogger("django_simba.engine")


class Request(Contender):
    """One acquisition attempt of a lock; lives until it is granted or abandoned.

    Every hook runs with the engine's mutex held, as do the caller's reads of its fields.
    """

    kind = "lock"

    def __init__(self, lock: LockBase, *, waits: bool, waiter: Waiter | None = None) -> None:
        super().__init__(lock.name, waits=waits)
        self.lock = lock
        # A thread's waiter is made only once it has to wait: most acquisitions are granted at once.
        self.waiter = waiter
        self.term: Term | None = None
        self.abandoned = False
        self.engine_closed = False
        self.error: BaseException | None = None  # of the last attempt the engine made for it

    def _wake(self) -> None:
        if self.waiter is not None:
            self.waiter.wake()

    def _granted(self, term: Term) -> bool:
        if self.abandoned:
            return False
        self.term = term
        self._wake()
        return True

    def _attempt_here(self, session_id: str) -> bool:
        waiter = self.waiter
        if waiter is None or not waiter.attempts_here or self.abandoned:
            return False  # not waiting yet, or not in a thread of its own: the engine's lane makes it
        self.attempt_session = session_id
        waiter.wake()
        return True

    def _attempt_failed(self, error: BaseException) -> None:
        self.error = error
        if hopeless(error):
            self._wake()  # retrying cannot help: the caller says why at once

    def _ended(self, term: Term, reason: EndReason) -> None:
        self.lock._term_ended(term, reason)

    def _engine_closed(self) -> None:
        self.engine_closed = True
        self._wake()

    @property
    def settled(self) -> bool:
        """Granted, or never will be."""
        return self.term is not None or self.engine_closed or hopeless(self.error)


def hopeless(error: BaseException | None) -> bool:
    """An attempt's error that no retry can mend (a misconfiguration)."""
    return isinstance(error, ConfigurationError)


class LockBase:
    """What a lock is whoever waits for it: its name, timings, held term, and how terms end.

    ``port`` is the engine, or a callable returning it (resolved at each acquisition).
    """

    def __init__(
        self,
        port: Port | Callable[[], Port],
        name: str,
        *,
        timeout: float | None = None,
        max_hold: float | None = None,
        on_lost: Callable[[Term, EndReason], Any] | None = None,
    ) -> None:
        self._port = port
        self.name = validate_name(name)
        check_seconds("timeout", timeout)
        check_seconds("max_hold", max_hold, allow_zero=False)
        self.timeout = timeout
        self.max_hold = max_hold
        self.on_lost = on_lost
        self._holder: Request | None = None
        self._max_hold_timer: Timer | None = None
        self._made()

    def _made(self) -> None:
        """Set up what a kind of lock keeps of its own (a subclass's hook)."""

    @property
    def engine(self) -> Port:
        port = self._port
        return port if not callable(port) else port()

    @property
    def term(self) -> Term | None:
        """The held term, or ``None``."""
        holder = self._holder
        return holder.term if holder is not None else None

    def locked(self) -> bool:
        """True while this object holds a valid term."""
        term = self.term
        return term is not None and term.is_valid()

    # -- shared steps of an acquisition ---------------------------------------------------

    def _timeout_for(self, timeout: float | EllipsisType | None) -> float | None:
        if isinstance(timeout, EllipsisType):
            timeout = self.timeout
        check_seconds("timeout", timeout)
        return timeout

    @staticmethod
    def _session_wait(port: Port, timeout: float | None) -> float | None:
        return None if timeout is None else max(timeout, port.backend.timeout)

    def _give_up(self, port: Port, request: Request) -> None:
        """Leave the line (a late grant is then passed on, never kept)."""
        with port.mutex:
            if request.term is None:
                request.abandoned = True
                port.withdraw(request)

    def _outcome(
        self, port: Port, request: Request, error: BaseException | None, timeout: float | None
    ) -> Term:
        """The granted term, or the error that says why there is none."""
        self._give_up(port, request)
        term = request.term
        if term is not None:
            return term
        if request.engine_closed:
            raise EngineClosed(f"the engine closed while lock {self.name!r} was waited for")
        error = error or request.error
        if hopeless(error) or (timeout == 0 and error is not None):
            assert error is not None
            raise error
        detail = f" (last error: {error})" if error is not None else ""
        raise LockTimeout(f"lock {self.name!r} not acquired within {timeout} s{detail}")

    def _hold(self, port: Port, request: Request, term: Term) -> None:
        self._holder = request
        if self.max_hold is not None:
            self._max_hold_timer = port.call_later(
                self.max_hold, lambda: self._reach_max_hold(port, request, term)
            )

    def _reach_max_hold(self, port: Port, request: Request, term: Term) -> None:
        with port.mutex:
            port.release_later(request, term, EndReason.MAX_HOLD)

    def _unhold(self) -> tuple[Request, Term]:
        """Forget the held term before releasing it; LeaseNotHeld when there is none."""
        holder = self._holder
        if holder is None or holder.term is None:
            raise LeaseNotHeld(f"lock {self.name!r} is not held")
        self._holder = None
        if self._max_hold_timer is not None:
            self._max_hold_timer.cancel()
            self._max_hold_timer = None
        return holder, holder.term

    @staticmethod
    def _released(term: Term, reason: EndReason) -> None:
        if reason is not EndReason.RELEASED:
            raise LeaseLost(term, reason)

    def _term_ended(self, term: Term, reason: EndReason) -> None:
        if reason is not EndReason.RELEASED and self.on_lost is not None:
            on_lost = self.on_lost
            self.engine.run_callback(lambda: on_lost(term, reason))


class Lock(LockBase):
    """An exclusive lock on ``name`` (see the module docstring).

    ``timeout`` is the default for :meth:`acquire` and the context manager
    (``None``: wait forever); ``max_hold`` releases the lock automatically after
    that many seconds (reported as a loss); ``on_lost(term, reason)`` runs on the
    callback thread when a held term ends without :meth:`release` (taken over,
    session expired, maximum hold time...).
    """

    def _made(self) -> None:
        # Held from a term's grant to its release: another thread sharing this object waits.
        self._mutex = threading.Lock()
        self._holder_thread: int | None = None

    def acquire(self, timeout: float | EllipsisType | None = ..., *, blocking: bool = True) -> Term:
        """Wait up to ``timeout`` seconds (``None``: forever; 0: one try) and return the term.

        Raises :class:`LockTimeout` when the lock could not be had in time.
        """
        timeout = self._timeout_for(0 if not blocking else timeout)
        if self._holder is not None and self._holder_thread == threading.get_ident():
            raise LockHeld(f"lock {self.name!r} is already held by this thread (locks are not re-entrant)")
        port = self.engine
        started = port.now()
        request = Request(self, waits=timeout != 0)
        error = port.acquire_now(request, self._session_wait(port, timeout))
        if timeout != 0 and not request.settled and not hopeless(error):
            self._wait(port, request, started, timeout)
        term = self._outcome(port, request, error, timeout)
        # Another thread sharing this object waits for it to be released first.
        self._mutex.acquire()
        self._holder_thread = threading.get_ident()
        self._hold(port, request, term)
        return term

    def _wait(self, port: Port, request: Request, started: float, timeout: float | None) -> None:
        with port.mutex:
            if request.settled:
                return
            waiter = request.waiter = ThreadWaiter()
        while True:
            remaining = None if timeout is None else started + timeout - port.now()
            if remaining is not None and remaining <= 0:
                return
            waiter.wait(remaining)
            with port.mutex:
                if request.settled:
                    return
                waiter.clear()
                session_id, request.attempt_session = request.attempt_session, None
            if session_id is not None:
                port.attempt_handed_over(request, session_id)  # its error reaches ``request.error``

    def try_acquire(self) -> Term | None:
        """One attempt: the term, or ``None`` when another holder has it."""
        try:
            return self.acquire(0)
        except LockTimeout:
            return None

    def release(self) -> None:
        """Release the held term.

        Raises :class:`LeaseNotHeld` when nothing is held, and :class:`LeaseLost` (a subclass)
        when the term had already ended otherwise (taken over, expired, force-released, its
        maximum hold time): whatever ran since then was not protected by the lock.
        """
        holder, term = self._unhold()
        self._holder_thread = None
        try:
            reason = self.engine.release_now(holder, term)
        finally:
            self._mutex.release()
        self._released(term, reason)

    def __enter__(self) -> Term:
        return self.acquire()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        release_after(self.release, exc)

    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]:
        """Use as a decorator: every call runs while holding the lock."""

        @functools.wraps(fn)
        def locked(*args: P.args, **kwargs: P.kwargs) -> R:
            with self:
                return fn(*args, **kwargs)

        return locked

    def __repr__(self) -> str:
        return f"<Lock {self.name!r} term={self.term!r}>"


def release_after(release: Callable[[], None], error: BaseException | None) -> None:
    """Release at the end of a ``with`` block; a lost term raises only if the block did not.

    A block that raised keeps its own exception: the loss is logged instead of hiding it.
    """
    if error is None:
        release()
        return
    try:
        release()
    except LeaseLost as lost:
        logger.warning("django-simba: %s while the block raised %r", lost, error)


def check_seconds(field: str, value: object, *, allow_zero: bool = True) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{field} must be None or a number of seconds, not {value!r}")
    if value < 0 or (not allow_zero and value == 0):
        raise ValueError(f"{field} must be {'>= 0' if allow_zero else '> 0'} seconds, not {value!r}")
