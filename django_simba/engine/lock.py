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
from collections.abc import Callable, Sequence
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


class Acquisition:
    """One acquisition of a lock or a semaphore: lives until it is granted or abandoned.

    It contends for a name through one :class:`Claim` per name it could be granted: a lock's
    acquisition has one claim (itself, a :class:`Request`), a semaphore's one per permit. The
    first term granted to any claim is the acquisition's; every later offer is declined, and
    the engine hands that term to the next waiter here or frees it. Every hook runs with the
    engine's mutex held, as do the caller's reads of its fields.
    """

    def __init__(self, owner: LockBase, *, waits: bool, waiter: Waiter | None = None) -> None:
        self.owner = owner
        self.waits = waits
        # A thread's waiter is made only once it has to wait: most acquisitions are granted at once.
        self.waiter = waiter
        self.term: Term | None = None
        self.holder: Claim | None = None  # the claim whose term it is
        self.abandoned = False
        self.engine_closed = False
        self.error: BaseException | None = None  # of the last attempt the engine made for it
        self.max_hold_timer: Timer | None = None

    @property
    def claims(self) -> Sequence[Claim]:
        raise NotImplementedError

    def _wake(self) -> None:
        if self.waiter is not None:
            self.waiter.wake()

    def _take(self, claim: Claim, term: Term) -> bool:
        if self.abandoned or self.term is not None:
            return False
        self.term, self.holder = term, claim
        self._wake()
        return True

    def _hand_attempt(self, claim: Claim, session_id: str) -> bool:
        waiter = self.waiter
        if waiter is None or not waiter.attempts_here or self.abandoned or self.term is not None:
            return False  # not waiting yet, or not in a thread of its own: the engine's lane makes it
        claim.attempt_session = session_id
        waiter.wake()
        return True

    def _failed(self, error: BaseException) -> None:
        self.error = error
        if hopeless(error):
            self._wake()  # retrying cannot help: the caller says why at once

    def _closed(self) -> None:
        self.engine_closed = True
        self._wake()

    def handed_attempt(self) -> tuple[Claim, str] | None:
        """The first claim the engine handed an attempt to make here, and its session; taken."""
        for claim in self.claims:
            session_id = claim.attempt_session
            if session_id is not None:
                claim.attempt_session = None
                return claim, session_id
        return None

    @property
    def settled(self) -> bool:
        """Granted, or never will be."""
        return self.term is not None or self.engine_closed or hopeless(self.error)


class Claim(Contender):
    """One name an acquisition contends for, in that name's line; its hooks report to the acquisition."""

    def __init__(self, acquisition: Acquisition, name: str) -> None:
        super().__init__(name, waits=acquisition.waits)
        self.acquisition = acquisition
        self.kind = acquisition.owner.kind
        self.entered = False  # put in line by the acquisition
        self.left = False  # taken out of line by the engine (offered a term, or the engine closed)

    @property
    def in_line(self) -> bool:
        return self.entered and not self.left

    def _granted(self, term: Term) -> bool:
        self.left = True
        return self.acquisition._take(self, term)

    def _attempt_here(self, session_id: str) -> bool:
        return self.acquisition._hand_attempt(self, session_id)

    def _attempt_failed(self, error: BaseException) -> None:
        self.acquisition._failed(error)

    def _ended(self, term: Term, reason: EndReason) -> None:
        self.acquisition.owner._term_ended(term, reason)

    def _engine_closed(self) -> None:
        self.left = True
        self.acquisition._closed()


class Request(Acquisition, Claim):
    """A lock's acquisition: its one claim, on the lock's name, is itself."""

    def __init__(self, lock: LockBase, *, waits: bool, waiter: Waiter | None = None) -> None:
        Acquisition.__init__(self, lock, waits=waits, waiter=waiter)
        Claim.__init__(self, self, lock.name)

    @property
    def claims(self) -> Sequence[Claim]:
        return (self,)


def hopeless(error: BaseException | None) -> bool:
    """An attempt's error that no retry can mend (a misconfiguration)."""
    return isinstance(error, ConfigurationError)


class LockBase:
    """What a lock is whoever waits for it: its name, timings, held term, and how terms end.

    The base of semaphores too (:mod:`.semaphore`): every step below works on all the claims
    of an acquisition, and the bookkeeping of holders (``_keep``, ``_held_by``, ``_forget``) is
    what a semaphore, with a holder per thread or task, does otherwise.

    ``port`` is the engine, or a callable returning it (resolved at each acquisition).
    """

    kind = "lock"

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
        self._holder: Acquisition | None = None
        self._holder_key: object = None  # the thread or task that holds it
        # Guards who holds this object: a Lock keeps it for as long as it is held, a semaphore
        # only while it changes its holders.
        self._mutex = threading.Lock()

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
        """True while this object holds a valid term (a semaphore: while the caller holds one)."""
        term = self.term
        return term is not None and term.is_valid()

    # -- who holds it ---------------------------------------------------------------------

    def _held_by(self, who: object) -> Acquisition | None:
        """What ``who`` (a thread's ident, a task) holds through this object."""
        return self._holder if who is not None and self._holder_key == who else None

    def _keep(self, port: Port, who: object, request: Acquisition) -> None:
        self._holder, self._holder_key = request, who
        self._hold(port, request)

    def _forget(self, who: object, term: Term | None) -> Acquisition:
        """Stop holding (what ``who`` holds, or ``term``); LeaseNotHeld when there is none."""
        holder = self._holder
        if holder is None or holder.term is None:
            raise LeaseNotHeld(f"lock {self.name!r} is not held")
        self._holder = self._holder_key = None
        return holder

    def _refuse_reentry(self, who: object, caller: str) -> None:
        if self._held_by(who) is not None:
            kind, name = self.kind, self.name
            raise LockHeld(f"{kind} {name!r} is already held by this {caller} ({kind}s are not re-entrant)")

    # -- shared steps of an acquisition ---------------------------------------------------

    @staticmethod
    def _caller() -> object:
        """Who is calling, as holders are told apart: a thread's ident, a task."""
        return None

    def _request(self, port: Port, *, waits: bool, waiter: Waiter | None = None) -> Acquisition:
        """A new acquisition of this object."""
        return Request(self, waits=waits, waiter=waiter)

    def _timeout_for(self, timeout: float | EllipsisType | None) -> float | None:
        if isinstance(timeout, EllipsisType):
            timeout = self.timeout
        check_seconds("timeout", timeout)
        return timeout

    @staticmethod
    def _session_wait(port: Port, timeout: float | None) -> float | None:
        return None if timeout is None else max(timeout, port.backend.timeout)

    def _first_attempts(
        self, port: Port, request: Acquisition, session_wait: float | None
    ) -> BaseException | None:
        """Try the claims one by one in the calling thread until one is granted; the last error.

        A claim refused stays in line. After an error, a blocking acquisition puts the claims
        not tried yet in line too (the engine retries them); a one-shot try stops there.
        """
        claims = request.claims
        for index, claim in enumerate(claims):
            with port.mutex:
                # Settled already: a permit tried earlier was granted from its line meanwhile, and
                # taking another now would only hold it until the engine freed it again.
                if request.abandoned or request.settled:
                    return None
            error = port.acquire_now(claim, session_wait)
            with port.mutex:
                claim.entered = True
                if request.abandoned:  # its caller left while the attempt was made (a cancelled task)
                    self._withdraw(port, claim)
                    return error
                if request.settled:
                    return error
                if error is not None:
                    if request.waits and not hopeless(error):
                        for untried in claims[index + 1 :]:
                            untried.entered = True
                            port.enqueue(untried)
                    return error
        return None

    @staticmethod
    def _withdraw(port: Port, claim: Claim) -> None:
        """Take ``claim`` out of its line if it still is in it (mutex held)."""
        if claim.in_line:
            claim.left = True
            port.withdraw(claim)

    def _give_up(self, port: Port, request: Acquisition) -> None:
        """Leave every line still waited in (a late grant is then passed on, never kept)."""
        with port.mutex:
            if request.term is None:
                request.abandoned = True
            for claim in request.claims:
                self._withdraw(port, claim)

    def _abandon(self, port: Port, request: Acquisition) -> None:
        """The caller left before the acquisition returned (cancelled, interrupted): keep nothing."""
        with port.mutex:
            self._give_up(port, request)
            term, holder = request.term, request.holder
            if term is not None and holder is not None and not port.closed:
                port.release_later(holder, term, EndReason.RELEASED)  # granted as its waiter left

    def _outcome(
        self, port: Port, request: Acquisition, error: BaseException | None, timeout: float | None
    ) -> Term:
        """The granted term, or the error that says why there is none."""
        self._give_up(port, request)
        term = request.term
        if term is not None:
            return term
        if request.engine_closed:
            raise EngineClosed(f"the engine closed while {self.kind} {self.name!r} was waited for")
        error = error or request.error
        if hopeless(error) or (timeout == 0 and error is not None):
            assert error is not None
            raise error
        detail = f" (last error: {error})" if error is not None else ""
        raise LockTimeout(f"{self.kind} {self.name!r} not acquired within {timeout} s{detail}")

    def _hold(self, port: Port, request: Acquisition) -> None:
        term = request.term
        if self.max_hold is not None and term is not None:
            request.max_hold_timer = port.call_later(
                self.max_hold, lambda: self._reach_max_hold(port, request, term)
            )

    @staticmethod
    def _reach_max_hold(port: Port, request: Acquisition, term: Term) -> None:
        with port.mutex:
            if request.holder is not None:
                port.release_later(request.holder, term, EndReason.MAX_HOLD)

    def _unhold(self, who: object, term: Term | None = None) -> tuple[Claim, Term]:
        """Forget the held term before releasing it: the claim that holds it, and the term."""
        request = self._forget(who, term)
        if request.max_hold_timer is not None:
            request.max_hold_timer.cancel()
            request.max_hold_timer = None
        assert request.holder is not None and request.term is not None
        return request.holder, request.term

    @staticmethod
    def _released(term: Term, reason: EndReason) -> None:
        if reason is not EndReason.RELEASED:
            raise LeaseLost(term, reason)

    def _term_ended(self, term: Term, reason: EndReason) -> None:
        if reason is not EndReason.RELEASED and self.on_lost is not None:
            on_lost = self.on_lost
            self.engine.run_callback(lambda: on_lost(term, reason))


class ThreadAcquirer(LockBase):
    """Acquiring from threads: blocking, one try, timeouts, a context manager and a decorator."""

    def acquire(self, timeout: float | EllipsisType | None = ..., *, blocking: bool = True) -> Term:
        """Wait up to ``timeout`` seconds (``None``: forever; 0: one try) and return the term.

        Raises :class:`LockTimeout` when it could not be had in time.
        """
        timeout = self._timeout_for(0 if not blocking else timeout)
        who = self._caller()
        self._refuse_reentry(who, "thread")
        port = self.engine
        started = port.now()
        request = self._request(port, waits=timeout != 0)
        try:
            error = self._first_attempts(port, request, self._session_wait(port, timeout))
            if timeout != 0 and not request.settled and not hopeless(error):
                self._wait(port, request, started, timeout)
        except BaseException:
            self._abandon(port, request)  # interrupted, or the engine failed: never keep a late grant
            raise
        term = self._outcome(port, request, error, timeout)
        self._keep(port, who, request)
        return term

    def _wait(self, port: Port, request: Acquisition, started: float, timeout: float | None) -> None:
        with port.mutex:
            if request.settled:
                return
            waiter = request.waiter = ThreadWaiter()
        while True:
            with port.mutex:
                if request.settled:
                    return
                handed = request.handed_attempt()
                if handed is None:
                    waiter.clear()
            if handed is not None:
                port.attempt_handed_over(*handed)  # its error reaches ``request.error``
                continue
            remaining = None if timeout is None else started + timeout - port.now()
            if remaining is not None and remaining <= 0:
                return
            waiter.wait(remaining)

    def try_acquire(self) -> Term | None:
        """One attempt: the term, or ``None`` when it is held elsewhere."""
        try:
            return self.acquire(0)
        except LockTimeout:
            return None

    @staticmethod
    def _caller() -> object:
        return threading.get_ident()

    def _release(self, who: object, term: Term | None = None) -> None:
        holder, held = self._unhold(who, term)
        reason = self.engine.release_now(holder, held)
        self._released(held, reason)

    def release(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Term:
        return self.acquire()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        release_after(self.release, exc)

    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]:
        """Use as a decorator: every call runs while holding it."""

        @functools.wraps(fn)
        def locked(*args: P.args, **kwargs: P.kwargs) -> R:
            with self:
                return fn(*args, **kwargs)

        return locked


class Lock(ThreadAcquirer):
    """An exclusive lock on ``name`` (see the module docstring).

    ``timeout`` is the default for :meth:`acquire` and the context manager
    (``None``: wait forever); ``max_hold`` releases the lock automatically after
    that many seconds (reported as a loss); ``on_lost(term, reason)`` runs on the
    callback thread when a held term ends without :meth:`release` (taken over,
    session expired, maximum hold time...).
    """

    def _keep(self, port: Port, who: object, request: Acquisition) -> None:
        # Another thread sharing this object waits for it to be released first.
        self._mutex.acquire()
        super()._keep(port, who, request)

    def release(self) -> None:
        """Release the held term.

        Raises :class:`LeaseNotHeld` when nothing is held, and :class:`LeaseLost` (a subclass)
        when the term had already ended otherwise (taken over, expired, force-released, its
        maximum hold time): whatever ran since then was not protected by the lock.
        """
        holder, term = self._unhold(None)
        try:
            reason = self.engine.release_now(holder, term)
        finally:
            self._mutex.release()
        self._released(term, reason)

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
