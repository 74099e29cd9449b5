"""Locks: a blocking, exclusive term on a name, renewed by the session while held.

A :class:`Lock` is **not re-entrant**: acquiring a lock that the same object
already holds raises :class:`LockHeld` instead of deadlocking. Several threads
may share one ``Lock`` object (the others wait), or each make their own for the
same name; either way, two threads never hold the name at once, and every
holder gets a term with a new, higher token.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from types import EllipsisType, TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ..errors import EngineClosed, LeaseLost, LeaseNotHeld, LockHeld, LockTimeout
from ..spi import validate_name
from .contender import Contender
from .term import EndReason, Term

if TYPE_CHECKING:
    from .engine import Engine
    from .runtime import Timer

logger = logging.getLogger("django_simba.engine")

P = ParamSpec("P")
R = TypeVar("R")


class _Request(Contender):
    """One acquisition attempt of a lock; lives until it is granted or abandoned."""

    kind = "lock"

    def __init__(self, lock: Lock, *, waits: bool) -> None:
        super().__init__(lock.name, waits=waits)
        self.lock = lock
        # Made only when the caller has to wait: most acquisitions are granted in the caller's thread.
        # Set when a term is granted, and when the engine hands the caller an attempt to make.
        self.done: threading.Event | None = None
        self.term: Term | None = None
        self.abandoned = False
        self.engine_closed = False

    def _granted(self, term: Term) -> bool:
        # Called with the engine's mutex held, as is the creation of ``done``.
        if self.abandoned:
            return False
        self.term = term
        if self.done is not None:
            self.done.set()
        return True

    def _attempt_here(self, session_id: str) -> bool:
        # Called with the engine's mutex held, as are the caller's reads of ``attempt_session``.
        if self.done is None or self.abandoned:
            return False  # not waiting yet, or not any more: the engine's lane makes it
        self.attempt_session = session_id
        self.done.set()
        return True

    def _ended(self, term: Term, reason: EndReason) -> None:
        self.lock._term_ended(self, term, reason)

    def _engine_closed(self) -> None:
        # Called with the engine's mutex held, as are the caller's reads of ``engine_closed``.
        self.engine_closed = True
        if self.done is not None:
            self.done.set()


class Lock:
    """An exclusive lock on ``name`` (see the module docstring).

    ``timeout`` is the default for :meth:`acquire` and the context manager
    (``None``: wait forever); ``max_hold`` releases the lock automatically after
    that many seconds; ``on_lost(term, reason)`` runs on the callback thread when
    a held term ends without :meth:`release` (taken over, session expired...).
    """

    def __init__(
        self,
        engine: Engine,
        name: str,
        *,
        timeout: float | None = None,
        max_hold: float | None = None,
        on_lost: Callable[[Term, EndReason], Any] | None = None,
    ) -> None:
        self.engine = engine
        self.name = validate_name(name)
        _check_seconds("timeout", timeout)
        _check_seconds("max_hold", max_hold, allow_zero=False)
        self.timeout = timeout
        self.max_hold = max_hold
        self.on_lost = on_lost
        self._mutex = threading.Lock()
        self._holder: _Request | None = None
        self._holder_thread: int | None = None
        self._max_hold_timer: Timer | None = None

    @property
    def term(self) -> Term | None:
        """The held term, or ``None``."""
        holder = self._holder
        return holder.term if holder is not None else None

    def locked(self) -> bool:
        """True while this object holds a valid term."""
        term = self.term
        return term is not None and term.is_valid()

    def acquire(self, timeout: float | EllipsisType | None = ..., *, blocking: bool = True) -> Term:
        """Wait up to ``timeout`` seconds (``None``: forever; 0: one try) and return the term.

        Raises :class:`LockTimeout` when the lock could not be had in time.
        """
        if isinstance(timeout, EllipsisType):
            timeout = self.timeout
        if not blocking:
            timeout = 0
        _check_seconds("timeout", timeout)
        if self._holder is not None and self._holder_thread == threading.get_ident():
            raise LockHeld(f"lock {self.name!r} is already held by this thread (locks are not re-entrant)")
        engine = self.engine
        started = engine.now()
        request = _Request(self, waits=timeout != 0)
        error = engine.acquire_now(request, None if timeout is None else max(timeout, engine.backend.timeout))
        # ``term`` is set once, under the engine's mutex: read without it, a set term is final.
        if timeout != 0 and request.term is None:
            with engine._mutex:
                if request.term is None and not request.engine_closed:
                    request.done = threading.Event()
            done = request.done
            while done is not None and request.term is None and not request.engine_closed:
                remaining = None if timeout is None else started + timeout - engine.now()
                if remaining is not None and remaining <= 0:
                    break
                done.wait(remaining)
                with engine._mutex:
                    if request.term is not None or request.engine_closed:
                        break
                    done.clear()
                    session_id, request.attempt_session = request.attempt_session, None
                if session_id is not None:
                    error = engine.attempt_handed_over(request, session_id) or error
        if request.term is None:
            with engine._mutex:
                if request.term is None:
                    request.abandoned = True
                    engine._withdraw(request)
        term = request.term
        if term is None:
            if request.engine_closed:
                raise EngineClosed(f"the engine closed while lock {self.name!r} was waited for")
            if timeout == 0 and error is not None:
                raise error
            detail = f" (last error: {error})" if error is not None else ""
            raise LockTimeout(f"lock {self.name!r} not acquired within {timeout} s{detail}")
        self._adopt(request, term)
        return term

    def try_acquire(self) -> Term | None:
        """One attempt: the term, or ``None`` when another holder has it."""
        try:
            return self.acquire(0)
        except LockTimeout:
            return None

    def _adopt(self, request: _Request, term: Term) -> None:
        # Another thread sharing this object waits for it to be released first.
        self._mutex.acquire()
        self._holder = request
        self._holder_thread = threading.get_ident()
        if self.max_hold is not None:
            self._max_hold_timer = self.engine.call_later(
                self.max_hold, lambda: self.engine.release_later(request, term, EndReason.MAX_HOLD)
            )

    def release(self) -> None:
        """Release the held term.

        Raises :class:`LeaseNotHeld` when nothing is held, and :class:`LeaseLost` (a subclass)
        when the term had already ended otherwise (taken over, expired, force-released, its
        maximum hold time): whatever ran since then was not protected by the lock.
        """
        holder = self._holder
        if holder is None or holder.term is None:
            raise LeaseNotHeld(f"lock {self.name!r} is not held")
        term = holder.term
        self._holder = None
        self._holder_thread = None
        if self._max_hold_timer is not None:
            self._max_hold_timer.cancel()
            self._max_hold_timer = None
        try:
            reason = self.engine.release_now(holder, term)
        finally:
            self._mutex.release()
        if reason is not EndReason.RELEASED:
            raise LeaseLost(term, reason)

    def _term_ended(self, request: _Request, term: Term, reason: EndReason) -> None:
        if reason is not EndReason.RELEASED and self.on_lost is not None:
            on_lost = self.on_lost
            self.engine.run_callback(lambda: on_lost(term, reason))

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


def _check_seconds(field: str, value: object, *, allow_zero: bool = True) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{field} must be None or a number of seconds, not {value!r}")
    if value < 0 or (not allow_zero and value == 0):
        raise ValueError(f"{field} must be {'>= 0' if allow_zero else '> 0'} seconds, not {value!r}")


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
