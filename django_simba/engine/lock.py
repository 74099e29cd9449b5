"""Locks: a blocking, exclusive term on a name, renewed by the session while held.

A :class:`Lock` is **not re-entrant**: acquiring a lock that the same thread already
holds raises :class:`LockHeld` instead of deadlocking. Several threads may share one
``Lock`` object, or each make their own for the same name; either way, two threads never
hold the name at once, and every holder gets a term with a new, higher token.

A shared object keeps who holds which term per thread (:mod:`.holdings`): a thread waits
for the name in the engine's line, with its own timeout, never on another thread's block;
``release()`` gives back the calling thread's own term (``release(term)`` that term, from
any thread) and raises :class:`LeaseLost` when that term had ended, even if the object has
since been granted to another thread, whose term it leaves alone. In a forked child the
object holds nothing of the parent's. :class:`~.alock.AsyncLock` is the same lock for
coroutines, per task: both are built on :class:`LockBase`, so their checks, timeouts,
maximum hold, holdings and loss reports cannot drift.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from types import EllipsisType, TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ..errors import ConfigurationError, EngineClosed, LeaseLost, LeaseNotHeld, LockHeld, LockTimeout
from ..spi import format_duration, validate_name
from ..spi.patience import CALLER_DEADLINE
from .callbacks import check_callback
from .config import check_seconds
from .contender import Contender
from .holdings import Holdings
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
    the engine gives that term to the next waiter here or frees it. Every hook runs with the
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
        self.pid = 0  # of the process whose caller holds it: its term's (set once granted)
        self._release_right = [True]  # popped by whoever gets to release it: list.pop is atomic

    def take_release(self) -> bool:
        """Take the one right to release this acquisition; False when another call took it."""
        try:
            self._release_right.pop()
        except IndexError:
            return False
        return True

    @property
    def release_taken(self) -> bool:
        return not self._release_right

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

    def _lend_attempt(self, claim: Claim, session_id: str) -> bool:
        waiter = self.waiter
        if waiter is None or not waiter.attempts_here or self.abandoned or self.term is not None:
            return False  # not waiting yet, or not in a thread of its own: the engine's lane makes it
        claim.lent_session = session_id
        waiter.wake()
        return True

    def _failed(self, error: BaseException) -> None:
        self.error = error
        if hopeless(error):
            self._wake()  # retrying cannot help: the caller says why at once

    def _closed(self) -> None:
        self.engine_closed = True
        self._wake()

    def lent_attempt(self) -> tuple[Claim, str] | None:
        """The first claim the engine lent an attempt to make here, and its session; taken."""
        for claim in self.claims:
            session_id = claim.lent_session
            if session_id is not None:
                claim.lent_session = None
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

    def on_granted(self, term: Term) -> bool:
        self.left = True
        return self.acquisition._take(self, term)

    def take_attempt(self, session_id: str) -> bool:
        return self.acquisition._lend_attempt(self, session_id)

    def on_attempt_failed(self, error: BaseException) -> None:
        self.acquisition._failed(error)

    def on_ended(self, term: Term, reason: EndReason) -> None:
        self.acquisition.owner._term_ended(term, reason)

    def on_engine_closed(self) -> None:
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
    """What a lock is whoever waits for it: its name, timings, holdings, and how terms end.

    The base of semaphores too (:mod:`.semaphore`): every step below works on all the claims
    of an acquisition, and the holdings (:mod:`.holdings`: one acquisition per caller, per
    process) are the same for locks and semaphores, threads and tasks.

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
        self.timeout = check_seconds("timeout", timeout)
        self.max_hold = check_seconds("max_hold", max_hold, allow_zero=False)
        check_callback("on_lost", on_lost)
        self.on_lost = on_lost
        self._holdings = Holdings()

    @property
    def port(self) -> Port:
        port = self._port
        return port if not callable(port) else port()

    @property
    def term(self) -> Term | None:
        """The term the caller (this thread, or this task) holds through this object, or ``None``."""
        held = self._holdings.of(self._caller(), self.port.runtime.pid)
        return held.term if held is not None else None

    @property
    def terms(self) -> list[Term]:
        """The terms held through this object in this process, by every thread or task."""
        holdings = self._holdings
        return holdings.terms(self.port.runtime.pid()) if holdings else []

    def locked(self) -> bool:
        """True while the caller holds a valid term through this object."""
        term = self.term
        return term is not None and term.is_valid()

    # -- who holds it ---------------------------------------------------------------------

    def _keep(self, port: Port, who: object, request: Acquisition) -> None:
        assert request.term is not None
        request.pid = request.term._pid  # the process it was granted to: no second look at the pid
        self._holdings[request if who is None else who] = request
        if self.max_hold is not None:
            self._hold(port, request)

    def _forget(self, who: object, term: Term | None) -> Acquisition:
        """Stop holding what ``who`` holds, or ``term``; LeaseNotHeld when there is none."""
        holdings = self._holdings
        held = holdings.take(who) if term is None else holdings.take_term(term)
        if held is None or held.term is None:
            raise LeaseNotHeld(self._not_held(who, term))
        return held

    def _not_held(self, who: object, term: Term | None) -> str:
        kind, name = self.kind, self.name
        if term is not None:
            return f"{kind} {name!r} is not held with the term {term!r}"
        message = f"{kind} {name!r} is not held by the caller"
        if self._holdings.others(who, self.port.runtime.pid()):
            message += (
                " (another thread or task holds it through this object: each holder releases its own"
                " term, and release(term) gives back the term it names, from any thread or task)"
            )
        return message

    def _refuse_reentry(self, port: Port, who: object, caller: str) -> None:
        holdings = self._holdings
        if who in holdings and holdings.of(who, port.runtime.pid) is not None:  # `in`: no call, mostly
            kind, name = self.kind, self.name
            raise LockHeld(f"{kind} {name!r} is already held by this {caller} ({kind}s are not re-entrant)")

    # -- shared steps of an acquisition ---------------------------------------------------

    @staticmethod
    def _caller() -> object:
        """Who is calling, as holders are told apart: a thread, a task."""
        return None

    def _request(self, port: Port, *, waits: bool, waiter: Waiter | None = None) -> Acquisition:
        """A new acquisition of this object."""
        return Request(self, waits=waits, waiter=waiter)

    def _timeout_for(self, timeout: float | EllipsisType | None) -> float | None:
        if isinstance(timeout, EllipsisType):
            return self.timeout  # checked when the object was made
        return check_seconds("timeout", timeout)

    @staticmethod
    def _session_wait(port: Port, timeout: float | None) -> float | None:
        return None if timeout is None else max(timeout, port.backend.timeout)

    def _first_attempts(
        self, port: Port, request: Acquisition, session_wait: float | None
    ) -> BaseException | None:
        """Try the claims one by one in the calling thread until one is granted; the last error.

        A claim of a blocking acquisition refused stays in line; one of a one-shot try never
        stands in line (``Lines.acquire_now``). After an error, a blocking acquisition puts
        the claims not tried yet in line too (the engine retries them); a one-shot try stops there.
        """
        claims = request.claims
        for index, claim in enumerate(claims):
            # Settled already: a permit tried earlier was granted from its line meanwhile, and taking
            # another now would only hold it until the engine freed it again. Read without the mutex:
            # these only ever turn true, and one that turns true right after is handled below.
            if request.abandoned or request.settled:
                return None
            error = port.acquire_now(claim, session_wait)
            with port.mutex:
                claim.entered = request.waits  # a one-shot try's claim left its line with the reply
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
        if request.term is not None:
            for claim in request.claims:
                if claim.entered and not claim.left:  # in_line, without a call: every acquire comes here
                    break
            else:
                return  # granted, and in no line: nothing to leave (neither ever turns back)
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
        raise LockTimeout(f"{self.kind} {self.name!r} not acquired within {format_duration(timeout)}{detail}")

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
        """Forget the held term before releasing it: the claim that holds it, and the term.

        A term inherited from a parent process is never released from here: in a child the
        engine has none of its parent's slots, so its release reports it ended ``forked``.
        """
        request = self._forget(who, term)
        if request.max_hold_timer is not None:
            request.max_hold_timer.cancel()
            request.max_hold_timer = None
        assert request.holder is not None and request.term is not None
        return request.holder, request.term

    @staticmethod
    def _released(term: Term, reason: EndReason) -> None:
        if reason.is_loss:
            raise LeaseLost(term, reason)

    def _term_ended(self, term: Term, reason: EndReason) -> None:
        if reason.is_loss and self.on_lost is not None:
            on_lost = self.on_lost
            self.port.run_callback(lambda: on_lost(term, reason))


class ThreadAcquirer(LockBase):
    """Acquiring from threads: blocking, one try, timeouts, a context manager and a decorator."""

    def acquire(self, timeout: float | EllipsisType | None = ..., *, blocking: bool = True) -> Term:
        """Wait up to ``timeout`` seconds (``None``: forever; 0: one try) and return the term.

        Raises :class:`LockTimeout` when it could not be had in time.
        """
        timeout = self._timeout_for(0 if not blocking else timeout)
        port = self.port
        who = self._caller()
        self._refuse_reentry(port, who, "thread")
        started = port.now()
        request = self._request(port, waits=timeout != 0)
        # The backend's waits for a connection or a turn end with ours (one try: the backend's own).
        patience = CALLER_DEADLINE.set(time.monotonic() + timeout if timeout else None)
        try:
            error = self._first_attempts(port, request, self._session_wait(port, timeout))
            if timeout != 0 and not request.settled and not hopeless(error):
                self._wait(port, request, started, timeout)
        except BaseException:
            self._abandon(port, request)  # interrupted, or the engine failed: never keep a late grant
            raise
        finally:
            CALLER_DEADLINE.reset(patience)
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
                lent = request.lent_attempt()
                if lent is None:
                    waiter.clear()
            if lent is not None:
                port.make_lent_attempt(*lent)  # its error reaches ``request.error``
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

    #: Who is calling: the thread object, not its ident (a new thread may reuse a dead one's).
    _caller = staticmethod(threading.current_thread)

    def release(self, term: Term | None = None) -> None:
        """Give back the term this thread holds, or the one ``term`` is (from any thread).

        Raises :class:`LeaseNotHeld` when there is none, and :class:`LeaseLost` (a subclass)
        when that term had already ended otherwise (taken over, expired, force-released, its
        maximum hold time, or granted in a parent process): whatever ran since then was not
        protected. Another thread's term is never touched.
        """
        holder, held = self._unhold(self._caller(), term)
        reason = self.port.release_now(holder, held)
        self._released(held, reason)

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
    session expired, maximum hold time...). ``term`` and ``locked()`` are the calling
    thread's; ``terms`` lists every thread's.
    """

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
