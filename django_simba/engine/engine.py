"""The engine: one session per process, and the terms of its local contenders, over one backend.

:class:`Engine` is a facade over parts with one job each, sharing one :class:`Context`
(the backend, the timings, the runtime and one mutex):

* :class:`~.keeper.SessionKeeper` opens the session, renews it, and gives it up at its
  local deadline;
* :class:`~.lines.Lines` keeps each name's local line, and grants every term through one gate;
* :class:`~.membership.Membership` keeps the groups joined here joined in every session;
* :mod:`.process` resets the engine in forked children and closes it at exit.

Contenders (locks, elections, groups, and their async twins) see the engine through the
:class:`~.port.Port` it implements. Blocking backend calls never run under the mutex:
they run on a runtime lane (keep-alive and opens on the session lane, everything else on
the contend lane) or, for a lock's first attempt and its release, in the caller's thread.
User callbacks run on the runtime's callback thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import EngineClosed
from ..spi import ConfigurationError, LeaseBackend, LeaseInfo, Member, Notification, NotificationKind, redact
from . import process
from .alock import AsyncLock
from .config import EngineConfig, check_seconds
from .contender import Contender
from .context import Context
from .election import Election
from .group import Group
from .keeper import SessionKeeper
from .lines import Lines
from .lock import Lock
from .membership import Membership
from .observer import EngineObserver
from .prefork import ForkHold
from .runtime import CONTEND_LANE, Outcome, Runtime, ThreadRuntime, Timer
from .semaphore import Semaphore
from .term import EndReason, Term

logger = logging.getLogger("django_simba.engine")

T = TypeVar("T")


class Engine:
    """Sessions, terms and memberships of one process over one backend."""

    def __init__(
        self,
        backend: LeaseBackend,
        config: EngineConfig | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        self.backend = backend
        self.config = config or EngineConfig()
        lease = backend.lease_duration_problem(self.config.lease_duration)
        if lease is not None:  # every session open would fail: refused here, where it is given
            raise ConfigurationError(f"{lease.message}. {lease.hint}")
        self.runtime: Runtime = runtime or ThreadRuntime()
        self._observers: list[EngineObserver] = []
        self._pid = self.runtime.pid()
        self.fork_hold = ForkHold()  # kept across forks: it is what the parent keeps for its children
        self._build()
        process.track(self)

    def _build(self) -> None:
        """The parts, and their state, anew (at construction and in a forked child)."""
        context = self._context = Context(self.backend, self.config, self.runtime, self._observers, self._pid)
        keeper = self.keeper = SessionKeeper(context)
        self.lines = Lines(context, keeper, self._session_or_wait)
        self.membership = Membership(context, keeper, self._session_or_wait)
        keeper.on_opened = [self.membership.session_opened, self.lines.session_opened]
        keeper.on_renewed = [self.lines.reconcile, self.membership.session_renewed]
        keeper.on_lost = [self.lines.session_lost]
        self._subscribed = False
        self._notification_listeners: list[Callable[[Notification], None]] = []

    # -- public state --------------------------------------------------------------------

    @property
    def observers(self) -> list[EngineObserver]:
        """Who watches the engine (signals, metrics); replace the list to change it from any thread."""
        return self._observers

    @observers.setter
    def observers(self, observers: list[EngineObserver]) -> None:
        self._observers = self._context.observers = observers

    @property
    def mutex(self) -> threading.RLock:
        self._ensure_own_process()  # whoever takes the mutex, takes this process's
        return self._context.mutex

    @property
    def session_id(self) -> str | None:
        self._ensure_own_process()
        session = self.keeper.session
        return session.id if session is not None else None

    @property
    def session_deadline(self) -> float | None:
        session = self.keeper.session
        return session.deadline if session is not None else None

    @property
    def renew_every(self) -> float:
        """How often the session is renewed now: ``RENEW_INTERVAL``, or less after a short grant."""
        session = self.keeper.session
        return session.renew_every if session is not None else self.config.renew_interval

    @property
    def last_error(self) -> BaseException | None:
        return self._context.last_error

    @property
    def started(self) -> bool:
        return self.keeper.started

    @property
    def closed(self) -> bool:
        return self.keeper.closed

    def now(self) -> float:
        return self.runtime.now()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Engine:
        """Start the threads and open a session. Idempotent; never needed before first use."""
        self._ensure_own_process()
        with self.mutex:
            keeper = self.keeper
            if keeper.closed:
                raise EngineClosed("this engine was closed")
            if keeper.started:
                return self
            keeper.started = True
            self.runtime.start()
            if self.backend.notifies and not self._subscribed:
                self._subscribed = True
                self.backend.subscribe(self._on_notification)
            keeper.open()
        return self

    def close(self, timeout: float | None = None) -> None:
        """End every term, close the session so others take over at once, stop the threads.

        Every caller still waiting for a name, or for a session, wakes with :class:`EngineClosed`.
        """
        timeout = check_seconds("timeout", timeout)
        # In a child forked without hooks: forget the parent's session (never close it), open none.
        self._ensure_own_process(start=False)
        with self.mutex:
            if self.keeper.closed:
                return
            session = self.keeper.close()
            self.lines.close()
        if session is not None:
            try:
                self.backend.close_session(session.id)
            except Exception as error:
                logger.warning("django-simba: closing session %s failed: %s", session.id, redact(error))
        self.runtime.stop(self.backend.timeout if timeout is None else timeout)
        self.backend.close()

    def _ensure_own_process(self, *, start: bool = True) -> None:
        """Start over if this is a child forked without Python's fork hooks (uWSGI's default prefork).

        Such a child inherits the parent's engine as it was, session and terms included: used
        as it is, two processes would share one session, and so one term of a name.
        """
        pid = self.runtime.pid()
        if pid == self._pid:
            return
        # The parent's mutexes may have been held by its threads at the fork: take a new one.
        with process.reset_lock(pid):
            if self._pid != pid:
                logger.warning(
                    "django-simba: process %d was forked from %d without Python's fork hooks: "
                    "starting over with a session of its own",
                    pid,
                    self._pid,
                )
                self._after_fork_in_child(start=start)

    def _after_fork_in_child(self, *, start: bool = True) -> None:
        """The child never uses the parent's session or connections; it starts its own."""
        self._pid = self.runtime.pid()
        was_started = self.keeper.started and not self.keeper.closed
        slots = self.lines.slots
        self._build()
        self.runtime.after_fork()
        self.backend.after_fork()
        candidates, start_held = self.fork_hold.take_in_child()  # a pre-fork parent's, for this child
        was_started = was_started or start_held
        for slot in slots.values():
            if slot.term is not None:
                slot.term._end(EndReason.FORKED)
            # Elections go on contending in the child; a lock's waiting thread did not survive the fork.
            candidates.extend(
                c for c in [slot.holder, *slot.waiting] if c is not None and c.contends_after_fork()
            )
        if start and (was_started or candidates):
            self.start()
            with self.mutex:
                for candidate in candidates:
                    candidate.on_forked()
                    self.lines.enqueue(candidate)

    # -- sessions (the port) ---------------------------------------------------------------

    def wait_for_session(self, timeout: float | None) -> str:
        """Start if needed and return the live session's id, waiting at most ``timeout``."""
        self._ensure_own_process()
        return self._session_or_wait(timeout)

    def _session_or_wait(self, timeout: float | None) -> str:
        """:meth:`wait_for_session` for the parts, called where the process was checked already."""
        session = self.keeper.session
        if session is not None:
            return session.id  # the common case: started, and live (close clears it first)
        timeout = check_seconds("timeout", timeout)  # here only: the common case never uses it
        self.backend.check_caller()  # a session the caller itself keeps from opening: fail, not wait
        self.start()
        with self.mutex:
            return self.keeper.wait(timeout)

    def when_session(self, callback: Callable[[str | None], None]) -> None:
        self._ensure_own_process()
        self.start()
        with self.mutex:
            self.keeper.when_live(callback)

    def forget_session_waiter(self, callback: Callable[[str | None], None]) -> None:
        with self.mutex:
            self.keeper.forget_waiter(callback)

    def no_session(self) -> Exception:
        """The error of a caller that waited for a session in vain."""
        with self.mutex:
            return self.keeper.no_session()

    # -- the line of a name (the port) -------------------------------------------------------

    def enqueue(self, contender: Contender, *, delay: float | None = None) -> None:
        self.lines.enqueue(contender, delay=delay)

    def withdraw(self, contender: Contender) -> None:
        self.lines.withdraw(contender)

    def acquire_now(self, contender: Contender, session_wait: float | None) -> BaseException | None:
        self._ensure_own_process()
        return self.lines.acquire_now(contender, session_wait)

    def make_lent_attempt(self, contender: Contender, session_id: str) -> BaseException | None:
        self._ensure_own_process()
        return self.lines.make_lent_attempt(contender, session_id)

    def release_now(self, contender: Contender, term: Term) -> EndReason:
        self._ensure_own_process()
        return self.lines.release_now(contender, term)

    def release_later(self, contender: Contender, term: Term, reason: EndReason) -> None:
        self.lines.release_later(contender, term, reason)

    def park_for_fork(self, contender: Contender) -> bool:
        return self.fork_hold.park(contender)

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer:
        return self.runtime.call_later(delay, fn)

    def run_callback(self, fn: Callable[[], None]) -> None:
        self.runtime.run_callback(fn)

    def submit(self, call: Callable[[], T], on_done: Callable[[Outcome[T]], None]) -> None:
        """Run a backend call on the contend lane (group polling, async callers' releases)."""
        self._ensure_own_process()
        self.runtime.submit(CONTEND_LANE, call, on_done)

    # -- groups ----------------------------------------------------------------------------

    def join(self, group: str, session_wait: float | None) -> None:
        """Join ``group`` now and in every later session of this process."""
        self._ensure_own_process()
        self.membership.join(group, session_wait)

    def leave(self, group: str) -> None:
        self._ensure_own_process()
        self.membership.leave(group)

    def members(self, group: str) -> list[Member]:
        self._ensure_own_process()
        return self.backend.members(group)

    # -- primitives ------------------------------------------------------------------------

    def lock(
        self,
        name: str,
        *,
        timeout: float | None = None,
        max_hold: float | None = None,
        on_lost: Callable[[Term, EndReason], Any] | None = None,
    ) -> Lock:
        """A lock on ``name`` (not acquired yet; use ``with`` or :meth:`Lock.acquire`)."""
        return Lock(self, name, timeout=timeout, max_hold=max_hold, on_lost=on_lost)

    def alock(
        self,
        name: str,
        *,
        timeout: float | None = None,
        max_hold: float | None = None,
        on_lost: Callable[[Term, EndReason], Any] | None = None,
    ) -> AsyncLock:
        """The same lock for coroutines: its waiters hold no thread (``async with``)."""
        return AsyncLock(self, name, timeout=timeout, max_hold=max_hold, on_lost=on_lost)

    def semaphore(
        self,
        name: str,
        permits: int,
        *,
        timeout: float | None = None,
        max_hold: float | None = None,
        on_lost: Callable[[Term, EndReason], Any] | None = None,
    ) -> Semaphore:
        """At most ``permits`` holders of ``name`` at once, each holding a permit (a lease) of its own.

        For coroutines: ``AsyncSemaphore(engine, name, permits)`` (its waiters hold no thread).
        """
        return Semaphore(self, name, permits, timeout=timeout, max_hold=max_hold, on_lost=on_lost)

    def election(
        self,
        name: str,
        *,
        on_elected: Callable[[Term], Any] | None = None,
        on_revoked: Callable[[Term], Any] | None = None,
        serving_only: bool = True,
    ) -> Election:
        """Start contending for ``name`` now; :meth:`Election.close` ends the candidacy.

        ``serving_only=False``: contend even where the engine holds (a process that does not serve).
        """
        return Election(
            self, name, on_elected=on_elected, on_revoked=on_revoked, serving_only=serving_only
        ).start()

    def group(self, name: str, *, on_change: Callable[[list[Member]], Any] | None = None) -> Group:
        """A handle on group ``name``; with ``on_change``, its membership is watched at once."""
        return Group(self, name, on_change=on_change).watch()

    # -- observation -----------------------------------------------------------------------

    def owner(self, name: str) -> LeaseInfo | None:
        self._ensure_own_process()
        return self.backend.owner(name)

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        self._ensure_own_process()
        return self.backend.leases(prefix)

    def held_terms(self) -> list[Term]:
        self._ensure_own_process()
        with self.mutex:
            return self.lines.held_terms()

    # -- notifications ---------------------------------------------------------------------

    def _on_notification(self, event: Notification) -> None:
        with self.mutex:
            self.lines.on_notification(event)
            if event.kind is NotificationKind.RESYNC:
                self.membership.resync()
            listeners = list(self._notification_listeners)
        for listener in listeners:
            listener(event)

    def add_notification_listener(self, listener: Callable[[Notification], None]) -> None:
        with self.mutex:
            self._notification_listeners = [*self._notification_listeners, listener]

    def remove_notification_listener(self, listener: Callable[[Notification], None]) -> None:
        with self.mutex:
            self._notification_listeners = [x for x in self._notification_listeners if x is not listener]
