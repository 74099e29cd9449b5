"""The engine: one session per process, kept alive, and the terms of its local contenders.

Concurrency model: the engine's state is guarded by one re-entrant mutex. Blocking
backend calls never run under it: they run on a runtime lane (keep-alive and
opens on the session lane, everything else on the contend lane) or, for a lock's
first attempt and its release, directly in the caller's thread. Completions take
the mutex, check that the session they were made for is still the current one,
and update state. User callbacks run on the runtime's callback thread.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import EngineClosed
from ..spi import (
    BackendUnavailable,
    Grant,
    LeaseBackend,
    LeaseInfo,
    Member,
    Notification,
    NotificationKind,
    OpenedSession,
    Released,
    Renewal,
    SessionExpired,
    validate_name,
)
from .config import EngineConfig
from .contender import Contender
from .election import Election
from .group import Group
from .lock import Lock
from .observer import EngineObserver
from .outage import Outage
from .prefork import ForkHold
from .runtime import CONTEND_LANE, SESSION_LANE, Outcome, Runtime, ThreadRuntime, Timer
from .slot import FIRST_POLL_DELAY, Slot
from .term import EndReason, Term

logger = logging.getLogger("django_simba.engine")

T = TypeVar("T")

#: First retry delay after a failed open; doubles up to the renew interval.
FIRST_OPEN_RETRY = 0.1
#: After releasing a name other processes want, this process waits before taking it again, so the
#: one a release notification woke (or a poll finds it free) gets it: (acquire round trips, margin
#: in seconds), capped at a tenth of the renew interval. A notified waiter wakes within about a
#: round trip, and a longer pause leaves the name idle; a polling one comes when its backoff says.
NOTIFIED_COURTESY = (2, 0.0003)
POLLED_COURTESY = (3, 0.001)
COURTESY_CAP = 0.1
#: A name we learnt others want (they hold it, or were refused it) stays wanted this long, in renew intervals.
CONTENDED_FOR = 1.0


@dataclass(slots=True)
class _Session:
    id: str
    deadline: float
    keep_alive_in_flight: bool = False


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
        self.runtime: Runtime = runtime or ThreadRuntime()
        self.observers: list[EngineObserver] = []
        self._pid = self.runtime.pid()
        self.fork_hold = ForkHold()  # kept across forks: it is what the parent keeps for its children
        self._init_state()
        _track_for_fork(self)

    def _init_state(self) -> None:
        self._mutex = threading.RLock()
        self._session_changed = threading.Condition(self._mutex)
        self._session: _Session | None = None
        self._opening = False
        self._open_retry = FIRST_OPEN_RETRY
        self._last_error: BaseException | None = None
        self._outage = Outage(self.now, f"the {self.backend.vendor} backend")  # what of an outage to log
        self._started = False
        self._closed = False
        self._subscribed = False
        self._slots: dict[str, Slot] = {}
        self._lingering: set[str] = set()  # names still watched with nobody here waiting
        self._joined: dict[str, int] = {}  # group -> local joiners; rejoined in every new session
        self._last_purge: float | None = None
        self._acquire_round_trip: float | None = None  # moving average of acquire calls, seconds
        self._notification_listeners: list[Callable[[Notification], None]] = []

    # -- public state --------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        self._ensure_own_process()
        with self._mutex:
            return self._session.id if self._session else None

    @property
    def session_deadline(self) -> float | None:
        with self._mutex:
            return self._session.deadline if self._session else None

    @property
    def last_error(self) -> BaseException | None:
        return self._last_error

    @property
    def started(self) -> bool:
        return self._started

    @property
    def closed(self) -> bool:
        return self._closed

    def now(self) -> float:
        return self.runtime.now()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Engine:
        """Start the threads and open a session. Idempotent; never needed before first use."""
        self._ensure_own_process()
        with self._mutex:
            if self._closed:
                raise EngineClosed("this engine was closed")
            if self._started:
                return self
            self._started = True
            self.runtime.start()
            if self.backend.notifies and not self._subscribed:
                self._subscribed = True
                self.backend.subscribe(self._on_notification)
            self._open()
        return self

    def close(self, timeout: float | None = None) -> None:
        """End every term, close the session so others take over at once, stop the threads.

        Every caller still waiting for a name wakes with :class:`EngineClosed`.
        """
        self._ensure_own_process()  # in a child forked without hooks: never close the parent's session
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            session, self._session = self._session, None
            for slot in self._slots.values():
                slot.cancel_timer()
                waiting = list(slot.waiting)
                slot.waiting.clear()
                for contender in waiting:
                    contender._engine_closed()
                if slot.term is not None:
                    self._end_term(slot, EndReason.CLOSED)
            self._session_changed.notify_all()
        if session is not None:
            try:
                self.backend.close_session(session.id)
            except Exception as error:
                logger.warning("django-simba: closing session %s failed: %s", session.id, error)
        self.runtime.stop(self.backend.timeout if timeout is None else timeout)
        self.backend.close()

    def _ensure_own_process(self) -> None:
        """Start over if this is a child forked without Python's fork hooks (uWSGI's default prefork).

        Such a child inherits the parent's engine as it was, session and terms included: used
        as it is, two processes would share one session, and so one term of a name.
        """
        pid = self.runtime.pid()
        if pid == self._pid:
            return
        # The parent's mutexes may have been held by its threads at the fork: take a new one.
        with _reset_locks.setdefault(pid, threading.Lock()):
            if self._pid != pid:
                logger.warning(
                    "django-simba: process %d was forked from %d without Python's fork hooks: "
                    "starting over with a session of its own",
                    pid,
                    self._pid,
                )
                self._after_fork_in_child()

    def _after_fork_in_child(self) -> None:
        """The child never uses the parent's session or connections; it starts its own."""
        self._pid = self.runtime.pid()
        was_started = self._started and not self._closed
        slots = self._slots
        self._init_state()
        self.runtime.after_fork()
        self.backend.after_fork()
        candidates, start_held = self.fork_hold.take_in_child()  # a pre-fork parent's, for this child
        was_started = was_started or start_held
        for slot in slots.values():
            if slot.term is not None:
                slot.term._end(EndReason.FORKED)
            # Elections go on contending in the child; a lock's waiting thread did not survive the fork.
            for contender in [slot.holder, *slot.waiting]:
                if isinstance(contender, Election) and not contender.closed:
                    candidates.append(contender)
        if was_started or candidates:
            self.start()
            with self._mutex:
                for candidate in candidates:
                    candidate._forked()
                    self._enqueue(candidate)

    # -- session -------------------------------------------------------------------------

    def wait_for_session(self, timeout: float | None) -> str:
        """Start if needed and return the live session's id, waiting at most ``timeout``."""
        self._ensure_own_process()
        session = self._session
        if session is not None:
            return session.id  # the common case: started, and live (close clears it first)
        self.start()
        deadline = None if timeout is None else self.now() + timeout
        with self._mutex:
            while self._session is None:
                if self._closed:
                    raise EngineClosed("this engine was closed")
                remaining = None if deadline is None else deadline - self.now()
                if remaining is not None and remaining <= 0:
                    raise BackendUnavailable(
                        f"no session could be opened on the {self.backend.vendor} backend: "
                        f"{self._last_error or 'still trying'}"
                    )
                self._session_changed.wait(remaining)
            return self._session.id

    def _open(self) -> None:
        if self._closed or self._opening or self._session is not None or not self._started:
            return
        self._opening = True
        sent = self.now()
        lease, metadata = self.config.lease_duration, self.config.session_metadata()
        self.runtime.submit(
            SESSION_LANE,
            lambda: self.backend.open_session(lease, metadata),
            lambda outcome: self._on_opened(sent, outcome),
        )

    def _on_opened(self, sent: float, outcome: Outcome[OpenedSession]) -> None:
        sent = outcome.sent_at(sent)
        with self._mutex:
            self._opening = False
            if outcome.error is not None or outcome.value is None:
                self._last_error = outcome.error
                delay = self._open_retry * (0.5 + self.runtime.random.random())
                self._open_retry = min(self._open_retry * 2, self.config.renew_interval)
                what = f"cannot open a session on the {self.backend.vendor} backend ({outcome.error})"
                _log_outage(self._outage.failed(f"{what}; retrying in {delay:.2f} s"))
                self.runtime.call_later(delay, self._open_locked)
                return
            opened = outcome.value
            if self._closed:
                self.runtime.submit(
                    CONTEND_LANE, lambda: self.backend.close_session(opened.session_id), _ignore
                )
                return
            self._open_retry = FIRST_OPEN_RETRY
            self._last_error = None
            session = _Session(opened.session_id, self.config.trusted_until(sent, opened.remaining))
            self._session = session
            _log_outage(self._outage.succeeded())
            logger.info("django-simba: session %s opened on the %s backend", session.id, self.backend.vendor)
            self._notify_observers(lambda o: o.session_opened(session.id))
            self._session_changed.notify_all()
            self._schedule_keep_alive(session.id, sent + self.config.renew_interval - self.now())
            self._arm_deadline(session)
            for group in self._joined:
                self._submit_join(session.id, group)
            for slot in self._slots.values():
                self._kick(slot)
            self._maybe_purge()

    def _open_locked(self) -> None:
        with self._mutex:
            self._open()

    def _schedule_keep_alive(self, session_id: str, delay: float) -> None:
        self.runtime.call_later(delay, lambda: self._keep_alive(session_id))

    def _arm_deadline(self, session: _Session) -> None:
        self.runtime.call_later(session.deadline - self.now(), lambda: self._check_deadline(session.id))

    def _keep_alive(self, session_id: str) -> None:
        with self._mutex:
            session = self._session
            if session is None or session.id != session_id or session.keep_alive_in_flight:
                return
            session.keep_alive_in_flight = True
            sent = self.now()
            lease = self.config.lease_duration
            self.runtime.submit(
                SESSION_LANE,
                lambda: self.backend.keep_alive(session_id, lease),
                lambda outcome: self._on_kept_alive(session_id, sent, outcome),
            )

    def _on_kept_alive(self, session_id: str, sent: float, outcome: Outcome[Renewal]) -> None:
        sent = outcome.sent_at(sent)
        with self._mutex:
            session = self._session
            if session is None or session.id != session_id:
                return
            session.keep_alive_in_flight = False
            elapsed = self.now() - sent
            renewal = outcome.value
            in_time = renewal is not None and elapsed <= self.config.renew_interval
            self._notify_observers(lambda o: o.keep_alive_done(elapsed, in_time))
            if renewal is not None or isinstance(outcome.error, SessionExpired):
                _log_outage(self._outage.succeeded())  # it answered
            if isinstance(outcome.error, SessionExpired):
                self._lose_session(session_id, EndReason.SESSION_EXPIRED)
                return
            if renewal is None:
                self._last_error = error = outcome.error
                _log_outage(self._outage.failed(f"keep-alive of session {session_id} failed: {error}"))
                self._schedule_keep_alive(session_id, self.config.renew_interval / 2)
                return
            deadline = self.config.trusted_until(sent, renewal.remaining)
            if in_time:
                session.deadline = max(session.deadline, deadline)
            else:
                # Counts as failed: extend nothing, but a lease missing from the reply is still lost.
                logger.warning("django-simba: keep-alive of session %s took %.3f s", session_id, elapsed)
            self._reconcile(session_id, sent, renewal, deadline if in_time else None)
            next_in = sent + self.config.renew_interval - self.now()
            self._schedule_keep_alive(session_id, next_in if in_time else self.config.renew_interval / 2)
            self._drop_quiet_watches()
            self._maybe_purge()

    def _reconcile(self, session_id: str, sent: float, renewal: Renewal, deadline: float | None) -> None:
        """Match a keep-alive reply against local terms: extend, end lost ones, free orphans."""
        now = self.now()
        for slot in self._slots.values():
            term = slot.term
            if term is None:
                continue
            if term._deadline <= now:
                self._lapse(slot, session_id)  # a lapsed term is never extended back to life
            elif renewal.owned.get(slot.name) == term.token:
                if deadline is not None:
                    term._extend(deadline)
            elif slot.granted_at < sent:
                # The grant was answered before this keep-alive was sent, so the backend saw it first.
                self._end_term(slot, EndReason.LOST)
                self._kick(slot)
        for name, token in renewal.owned.items():
            slot = self._slot(name)
            if slot.busy is not None or token < slot.last_token:
                continue  # in flight, or a listing older than a term we since gave back
            if slot.term is not None and slot.term.token >= token:
                continue  # held here, with this term or a newer one
            if (
                self.backend.hands_over
                and slot.waiting
                and slot.holder is None
                and deadline is not None
                and self._grant(slot, session_id, token, deadline)
            ):
                continue  # handed to us: its notification is late
            # Ours on the backend, nobody's here (a reply lost, a failed release, a term already
            # granted here once): free that term, and never take it afterwards.
            slot.last_token = max(slot.last_token, token)
            self._release_in_background(slot, session_id, token)

    def _lapse(self, slot: Slot, session_id: str) -> None:
        """A term's own deadline passed without renewal: end it and give the name back."""
        term = slot.term
        if term is None:
            return
        self._end_term(slot, EndReason.DEADLINE)
        session = self._session
        if session is not None and session.id == session_id and slot.busy is None:
            self._release_in_background(slot, session_id, term.token)
        else:
            self._kick(slot)

    def _arm_term(self, slot: Slot, term: Term) -> None:
        """Call back at the term's deadline, so it ends on time even if the session lives on."""

        def check() -> None:
            with self._mutex:
                if slot.term is not term:
                    return
                if self.now() >= term._deadline:
                    self._lapse(slot, term.session_id)
                else:
                    self._arm_term(slot, term)

        slot.term_timer = self.runtime.call_later(term._deadline - self.now(), check)

    def _check_deadline(self, session_id: str) -> None:
        with self._mutex:
            session = self._session
            if session is None or session.id != session_id:
                return
            if self.now() >= session.deadline:
                logger.warning("django-simba: session %s passed its local deadline", session_id)
                self._lose_session(session_id, EndReason.DEADLINE)
            else:
                self._arm_deadline(session)

    def _lose_session(self, session_id: str, reason: EndReason) -> None:
        """End every term of the session and open a new one."""
        session = self._session
        if session is None or session.id != session_id:
            return
        self._session = None
        for slot in self._slots.values():
            slot.cancel_timer()
            if slot.term is not None:
                self._end_term(slot, reason)
        self._notify_observers(lambda o: o.session_lost(session_id, reason))
        if reason is EndReason.DEADLINE:
            # It may still be live on the backend: close it so its leases free at once.
            self.runtime.submit(CONTEND_LANE, lambda: self.backend.close_session(session_id), _ignore)
        self._session_changed.notify_all()
        self._open()

    def _maybe_purge(self) -> None:
        # Every backend decides what purging means (rows of crashed sessions, stale group entries).
        now = self.now()
        if self._last_purge is not None and now - self._last_purge < self.config.purge_interval:
            return
        self._last_purge = now
        self.runtime.submit(CONTEND_LANE, self.backend.purge_expired, _log_purge)

    # -- contention ------------------------------------------------------------------------

    def _slot(self, name: str) -> Slot:
        slot = self._slots.get(name)
        if slot is None:
            slot = self._slots[name] = Slot(name)
        return slot

    def _enqueue(self, contender: Contender, *, delay: float | None = None) -> None:
        """Put ``contender`` in line for its name (mutex held)."""
        if self._closed:
            raise EngineClosed("this engine was closed")
        slot = self._slot(contender.name)
        if contender not in slot.waiting:
            slot.waiting.append(contender)
        if slot.holder is not None:
            contender._refused()  # held here by another contender: decided without asking the backend
        if delay is None:
            self._kick(slot)
        elif slot.timer is None and slot.busy is None:
            slot.timer = self.runtime.call_later(delay, lambda: self._kick_locked(slot))

    def _withdraw(self, contender: Contender) -> None:
        """Take ``contender`` out of line (mutex held)."""
        slot = self._slots.get(contender.name)
        if slot is None:
            return
        if contender in slot.waiting:
            slot.waiting.remove(contender)
        attempt_was_handed = contender.attempt_session is not None
        if attempt_was_handed:
            # It gave up before making the attempt it was handed: nobody else will make it.
            contender.attempt_session = None
            slot.busy = None
        if not slot.waiting:
            slot.cancel_timer()
            session = self._session
            if not (contender.waits and session is not None and self.backend.hands_over):
                self._unwatch(slot)
            elif slot.busy is None:
                self._stop_waiting(slot, session.id)
            elif slot.watched:
                # An attempt on its way leaves the line on its reply; a quiet name is unwatched later.
                self._lingering.add(slot.name)
        elif attempt_was_handed:
            self._kick(slot)

    def _kick_locked(self, slot: Slot) -> None:
        with self._mutex:
            slot.timer = None
            self._kick(slot)

    def _kick(self, slot: Slot) -> None:
        """Start an acquire for the first waiter when nothing stands in the way (mutex held)."""
        session = self._session
        if slot.holder is not None or slot.busy is not None or not slot.waiting or session is None:
            return
        courtesy = slot.courtesy_until - self.now()
        if courtesy > 0:
            if slot.timer is None:
                slot.timer = self.runtime.call_later(courtesy, lambda: self._kick_locked(slot))
            return
        slot.cancel_timer()
        slot.busy = "acquire"
        slot.poked = False
        first = slot.waiting[0]
        if first._attempt_here(session.id):
            return  # its own thread makes it: attempt_handed_over
        session_id, name, wait, sent = session.id, slot.name, first.waits, self.now()
        self.runtime.submit(
            CONTEND_LANE,
            lambda: self.backend.acquire(session_id, name, wait=wait),
            lambda outcome: self._on_acquired_locked(slot, session_id, sent, outcome),
        )

    def _on_acquired_locked(
        self, slot: Slot, session_id: str, sent: float, outcome: Outcome[Grant | None]
    ) -> None:
        with self._mutex:
            self._on_acquired(slot, session_id, sent, outcome)

    def _on_acquired(self, slot: Slot, session_id: str, sent: float, outcome: Outcome[Grant | None]) -> None:
        """Handle an acquire's reply (mutex held)."""
        sent = outcome.sent_at(sent)
        slot.busy = None
        if outcome.error is None:
            self._measure_acquire(self.now() - sent)
            _log_outage(self._outage.succeeded())
        session = self._session
        if session is None or session.id != session_id:
            self._kick(slot)  # the grant, if any, belongs to a session we already gave up
            return
        if isinstance(outcome.error, SessionExpired):
            self._lose_session(session_id, EndReason.SESSION_EXPIRED)
            return
        if outcome.error is not None:
            # Maybe applied with its reply lost: a keep-alive will list it and we free it then.
            self._last_error = outcome.error
            _log_outage(self._outage.failed(f"acquire of {slot.name!r} failed: {outcome.error}"))
            self._retry_later(slot, self._poll_delay(slot))
            return
        grant = outcome.value
        if grant is None:
            slot.wanted_at = self.now()  # refused: another process holds it, and may want it again
            if not slot.waiting:
                self._stop_waiting(slot, session_id)  # its waiter gave up while it was on its way
                return
            for contender in slot.waiting:
                contender._refused()
            if slot.poked:  # released while this attempt was on its way: it may be free now
                self._kick(slot)
            elif not self._watch(slot):
                self._retry_later(slot, self._retry_delay(slot))
            return
        if not self._grant(slot, session_id, grant.token, self.config.trusted_until(sent, grant.remaining)):
            # The backend still has our previous term (its release failed): free it, then retry.
            self._release_in_background(slot, session_id, grant.token)

    def _grant(self, slot: Slot, session_id: str, token: int, deadline: float) -> bool:
        """A new term of the name for this process: to the first waiter still here (mutex held).

        The one gate every term of this process passes: a token not strictly above the last one
        granted here for the name is refused (False), so no two local terms ever share a token,
        whatever path (a reply, a keep-alive listing, a hand-over) offered it.
        """
        if token <= slot.last_token:
            return False
        slot.last_token = token
        slot.backoff = FIRST_POLL_DELAY
        term = Term(slot.name, token, session_id, deadline, self.now, self.runtime.pid)
        while slot.waiting:
            contender = slot.waiting.popleft()
            slot.holder, slot.term, slot.granted_at = contender, term, self.now()
            if contender._granted(term):
                self._arm_term(slot, term)
                if not slot.waiting:
                    self._unwatch_unless_contended(slot)
                self._notify_term_started(contender.kind, term)
                return True
        slot.holder = slot.term = None  # every waiter gave up meanwhile
        self._release_in_background(slot, session_id, token)
        return True

    def _take_handed(self, slot: Slot, session: _Session, token: int) -> None:
        """A release gave the name to our session, with ``token`` (mutex held)."""
        if token <= slot.last_token or slot.holder is not None:
            return  # a term we already have, or had (the grant gate would refuse it too)
        if not slot.waiting:
            # Nobody here wants it any more: pass it on, and never take that term afterwards.
            slot.last_token = token
            name, session_id = slot.name, session.id
            self.runtime.submit(CONTEND_LANE, lambda: self.backend.release(session_id, name, token), _ignore)
            return
        if slot.busy is not None:
            slot.poked = True  # the attempt on its way, or the one right after it, reports the term
            return
        # A handed term lasts as long as the session (SPI): the session's own deadline bounds it.
        self._grant(slot, session.id, token, session.deadline)

    def _stop_waiting(self, slot: Slot, session_id: str) -> None:
        """Nobody here waits for the name: leave the backend's line, so no release hands it to us.

        The watch goes only once out of line: a hand-over just before is still heard (and passed on).
        """
        if not self.backend.hands_over:
            return
        slot.busy = "leave"
        name = slot.name

        def left(outcome: Outcome[None]) -> None:
            with self._mutex:
                slot.busy = None
                if slot.waiting:
                    self._kick(slot)
                else:
                    self._unwatch_unless_contended(slot)

        self.runtime.submit(CONTEND_LANE, lambda: self.backend.stop_waiting(session_id, name), left)

    def _measure_acquire(self, seconds: float) -> None:
        average = self._acquire_round_trip
        self._acquire_round_trip = seconds if average is None else 0.8 * average + 0.2 * seconds

    def _offer_to_others(self, slot: Slot) -> None:
        """After our release (mutex held): if other processes want the name, let them have it first.

        Without this, a process that releases and at once acquires again wins nearly every
        time: its attempt leaves before a remote waiter has even heard of the release.
        """
        now = self.now()
        if self.backend.hands_over:
            return  # the release gave the name to the first waiting session already, if any
        if slot.waiting or now - slot.wanted_at > CONTENDED_FOR * self.config.renew_interval:
            return
        round_trip = self._acquire_round_trip or 0.0
        round_trips, margin = NOTIFIED_COURTESY if self.backend.notifying else POLLED_COURTESY
        delay = round_trips * round_trip + margin
        slot.courtesy_until = now + min(delay, COURTESY_CAP * self.config.renew_interval)

    def _retry_later(self, slot: Slot, delay: float) -> None:
        if slot.waiting and slot.timer is None:
            slot.timer = self.runtime.call_later(delay, lambda: self._kick_locked(slot))

    def _retry_delay(self, slot: Slot) -> float:
        """After a refusal: notified backends wait for the release, polled ones back off."""
        if self.backend.notifying:
            half = self.config.renew_interval / 2
            return half + self.runtime.random.uniform(0, half / 2)
        return self._poll_delay(slot)

    def _poll_delay(self, slot: Slot) -> float:
        delay = slot.backoff * self.runtime.random.uniform(0.5, 1.0)
        slot.backoff = min(slot.backoff * 2, self.config.renew_interval / 2)
        return delay

    def _watch(self, slot: Slot) -> bool:
        """Start watching the name; True when a new watch was asked for (it retries once set)."""
        if not self.backend.notifies or slot.watched or self.backend.hands_over_always:
            return False  # hands_over_always: the line itself tells a waiter it got the name
        slot.watched = True
        name = slot.name

        def watching(outcome: Outcome[None]) -> None:
            # A release between the refusal and the watch would go unnoticed: look once more.
            with self._mutex:
                if outcome.error is not None:
                    slot.watched = False
                if slot.holder is None and slot.busy is None:
                    self._kick(slot)
                if slot.busy is None:
                    self._retry_later(slot, self._retry_delay(slot))

        self.runtime.submit(CONTEND_LANE, lambda: self.backend.watch_lease(name), watching)
        return True

    def _unwatch_unless_contended(self, slot: Slot) -> None:
        """Nobody here waits for the name any more: stop watching it, unless it is contended.

        A name others want is likely wanted here again soon; dropping the watch at every grant
        would cost a subscription, and the look after it, at every refusal. Keep-alives drop it
        once the name has been quiet for a while.
        """
        # every grant comes here: the clock is read only where a watch could be kept
        if (
            slot.watched
            and self.backend.idle_watches_are_free
            and self.now() - slot.wanted_at <= CONTENDED_FOR * self.config.renew_interval
        ):
            self._lingering.add(slot.name)
        else:
            self._unwatch(slot)

    def _drop_quiet_watches(self) -> None:
        quiet_since = self.now() - CONTENDED_FOR * self.config.renew_interval
        for name in list(self._lingering):
            slot = self._slots[name]
            if slot.waiting:
                self._lingering.discard(name)  # in use again: unwatched with its waiters
            elif slot.wanted_at < quiet_since:
                self._unwatch(slot)

    def _unwatch(self, slot: Slot) -> None:
        self._lingering.discard(slot.name)
        if slot.watched:
            slot.watched = False
            name = slot.name
            self.runtime.submit(CONTEND_LANE, lambda: self.backend.unwatch_lease(name), _ignore)

    def _end_term(self, slot: Slot, reason: EndReason) -> None:
        term, holder = self._detach(slot)
        if term is None or holder is None or not term._end(reason):
            return
        self._report_end(holder, term, reason)

    def _detach(self, slot: Slot) -> tuple[Term | None, Contender | None]:
        """Take the held term out of its slot, so nothing here renews or ends it any more."""
        term, holder = slot.term, slot.holder
        slot.term = slot.holder = None
        if slot.term_timer is not None:
            slot.term_timer.cancel()
            slot.term_timer = None
        return term, holder

    def _report_end(self, holder: Contender, term: Term, reason: EndReason) -> None:
        holder._ended(term, reason)
        if self.observers:
            kind = holder.kind
            self._notify_observers(lambda o: o.term_ended(kind, term, reason))

    def _release_in_background(self, slot: Slot, session_id: str, token: int) -> None:
        slot.busy = "release"
        name = slot.name
        self.runtime.submit(
            CONTEND_LANE,
            lambda: self.backend.release(session_id, name, token),
            lambda outcome: self._on_released_locked(slot, outcome),
        )

    def _on_released_locked(self, slot: Slot, outcome: Outcome[Any]) -> None:
        with self._mutex:
            self._on_released(slot, outcome)

    def _on_released(self, slot: Slot, outcome: Outcome[Any]) -> None:
        """Handle a release's reply (mutex held)."""
        slot.busy = None
        if outcome.error is not None:
            logger.warning("django-simba: release of %r failed: %s", slot.name, outcome.error)
        self._kick(slot)

    # -- operations used by locks ----------------------------------------------------------

    def acquire_now(self, contender: Contender, session_wait: float | None) -> BaseException | None:
        """Try once in the caller's thread; if refused, leave ``contender`` in line.

        Returns the error of the attempt, if it failed (the contender stays in line).
        """
        session_id = self.wait_for_session(session_wait)
        with self._mutex:
            slot = self._slot(contender.name)
            session = self._session
            inline = (
                slot.holder is None
                and slot.busy is None
                and not slot.waiting
                and session is not None
                and session.id == session_id
                and self.now() >= slot.courtesy_until
            )
            if not inline:
                self._enqueue(contender)
                return None
            slot.busy = "acquire"
            sent = self.now()
        outcome = self._acquire_outcome(session_id, contender.name, contender.waits)
        with self._mutex:
            slot.waiting.appendleft(contender)
            self._on_acquired(slot, session_id, sent, outcome)
        return outcome.error

    def attempt_handed_over(self, contender: Contender, session_id: str) -> BaseException | None:
        """Make, in the caller's thread, the attempt ``_kick`` handed to ``contender``; its error, if any."""
        with self._mutex:
            slot = self._slot(contender.name)
            sent = self.now()
        outcome = self._acquire_outcome(session_id, contender.name, contender.waits)
        with self._mutex:
            self._on_acquired(slot, session_id, sent, outcome)
        return outcome.error

    def _acquire_outcome(self, session_id: str, name: str, wait: bool) -> Outcome[Grant | None]:
        """One acquire on the backend, in the calling thread."""
        try:
            return Outcome(value=self.backend.acquire(session_id, name, wait=wait))
        except Exception as error:
            return Outcome(error=error)

    def release_now(self, contender: Contender, term: Term) -> EndReason:
        """End ``term`` and free its name on the backend, in the caller's thread.

        Returns how the term ended: RELEASED, or how it had ended before (lost, expired, its
        maximum hold time...), which the release itself may be the first to learn (an operator
        force-released the name).
        """
        self._ensure_own_process()
        with self._mutex:
            slot = self._slots.get(contender.name)
            if slot is None or slot.holder is not contender or slot.term is not term:
                return term.ended or EndReason.LOST  # ended already
            if term._deadline <= self.now():
                self._lapse(slot, term.session_id)  # its timer has not come round yet
                return EndReason.DEADLINE
            session = self._session
            self._detach(slot)
            term._end(EndReason.RELEASED)  # invalid at once; reported once the backend answered
            if session is None or session.id != term.session_id:
                self._report_end(contender, term, EndReason.RELEASED)
                self._offer_to_others(slot)
                self._kick(slot)
                return EndReason.RELEASED
            slot.busy = "release"
        released = Released()
        try:
            released = self.backend.release(term.session_id, term.name, term.token)
            outcome: Outcome[None] = Outcome()
        except Exception as error:
            outcome = Outcome(error=error)
        with self._mutex:
            if released.held is False:
                term._lost_before_release()
            if released.contended:  # a polled backend saw another session turned away during the term
                slot.wanted_at = self.now()
            reason = term.ended or EndReason.RELEASED
            self._report_end(contender, term, reason)
            self._offer_to_others(slot)
            self._on_released(slot, outcome)
        return reason

    def release_later(self, contender: Contender, term: Term, reason: EndReason = EndReason.RELEASED) -> None:
        """End ``term`` now and free its name from the contend lane (timers: a maximum hold time)."""
        self._ensure_own_process()
        with self._mutex:
            slot = self._slots.get(contender.name)
            if slot is None or slot.holder is not contender or slot.term is not term:
                return
            session = self._session
            self._end_term(slot, reason)
            if session is None or session.id != term.session_id:
                self._kick(slot)
                return
            self._release_in_background(slot, term.session_id, term.token)

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer:
        return self.runtime.call_later(delay, fn)

    def run_callback(self, fn: Callable[[], None]) -> None:
        self.runtime.run_callback(fn)

    # -- groups ----------------------------------------------------------------------------

    def join(self, group: str, session_wait: float | None) -> None:
        """Join ``group`` now and in every later session of this process."""
        validate_name(group)
        deadline = None if session_wait is None else self.now() + session_wait
        with self._mutex:
            # Counted first, so a session opened while this join runs joins the group too.
            self._joined[group] = self._joined.get(group, 0) + 1
        try:
            while True:
                wait = None if deadline is None else max(0.0, deadline - self.now())
                session_id = self.wait_for_session(wait)
                try:
                    self.backend.join(session_id, group)
                    return
                except SessionExpired:
                    with self._mutex:
                        self._lose_session(session_id, EndReason.SESSION_EXPIRED)
        except BaseException:
            with self._mutex:
                self._forget_join(group)
            raise

    def _forget_join(self, group: str) -> bool:
        """Count one local joiner less; True when it was the last (mutex held)."""
        count = self._joined.get(group, 0)
        if count > 1:
            self._joined[group] = count - 1
            return False
        self._joined.pop(group, None)
        return True

    def leave(self, group: str) -> None:
        validate_name(group)
        self._ensure_own_process()
        with self._mutex:
            if not self._forget_join(group):
                return
            session_id = self._session.id if self._session else None
        if session_id is not None:
            self.backend.leave(session_id, group)

    def _submit_join(self, session_id: str, group: str) -> None:
        def on_done(outcome: Outcome[None]) -> None:
            if outcome.error is not None and not isinstance(outcome.error, SessionExpired):
                logger.warning("django-simba: rejoining %r failed (%s); retrying", group, outcome.error)
                self.runtime.call_later(
                    self.config.renew_interval / 2, lambda: self._rejoin(session_id, group)
                )

        self.runtime.submit(CONTEND_LANE, lambda: self.backend.join(session_id, group), on_done)

    def _rejoin(self, session_id: str, group: str) -> None:
        with self._mutex:
            if self._session is not None and self._session.id == session_id and group in self._joined:
                self._submit_join(session_id, group)

    def members(self, group: str) -> list[Member]:
        return self.backend.members(group)

    def submit(self, call: Callable[[], T], on_done: Callable[[Outcome[T]], None]) -> None:
        """Run a backend call on the contend lane (for groups' change polling)."""
        self.runtime.submit(CONTEND_LANE, call, on_done)

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

    def election(
        self,
        name: str,
        *,
        on_elected: Callable[[Term], Any] | None = None,
        on_revoked: Callable[[Term], Any] | None = None,
    ) -> Election:
        """Start contending for ``name`` now; :meth:`Election.close` ends the candidacy."""
        return Election(self, name, on_elected=on_elected, on_revoked=on_revoked).start()

    def group(self, name: str, *, on_change: Callable[[list[Member]], Any] | None = None) -> Group:
        """A handle on group ``name``; with ``on_change``, its membership is watched at once."""
        return Group(self, name, on_change=on_change).watch()

    # -- observation -----------------------------------------------------------------------

    def owner(self, name: str) -> LeaseInfo | None:
        return self.backend.owner(name)

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        return self.backend.leases(prefix)

    def held_terms(self) -> list[Term]:
        self._ensure_own_process()
        with self._mutex:
            return [slot.term for slot in self._slots.values() if slot.term is not None]

    # -- notifications ---------------------------------------------------------------------

    def _on_notification(self, event: Notification) -> None:
        with self._mutex:
            if event.kind is NotificationKind.RELEASED:
                slots: Iterable[Slot] = [self._slots[event.name]] if event.name in self._slots else []
            elif event.kind is NotificationKind.RESYNC:
                slots = list(self._slots.values())
            else:
                slots = []
            session = self._session
            if (  # handed to another session, the name is held: nothing to do here
                event.kind is NotificationKind.HANDED_OVER
                and session is not None
                and event.session_id == session.id
                and event.name in self._slots
            ):
                self._take_handed(self._slots[event.name], session, event.token)
            for slot in slots:
                if slot.waiting and slot.holder is None:
                    slot.backoff = FIRST_POLL_DELAY
                    if slot.busy is not None:
                        slot.poked = True
                    self._kick(slot)
            listeners = list(self._notification_listeners)
        for listener in listeners:
            listener(event)

    def add_notification_listener(self, listener: Callable[[Notification], None]) -> None:
        with self._mutex:
            self._notification_listeners = [*self._notification_listeners, listener]

    def remove_notification_listener(self, listener: Callable[[Notification], None]) -> None:
        with self._mutex:
            self._notification_listeners = [x for x in self._notification_listeners if x is not listener]

    def _notify_term_started(self, kind: str, term: Term) -> None:
        if self.observers:  # every grant comes here: no closure when nobody listens
            self._notify_observers(lambda o: o.term_started(kind, term))

    def _notify_observers(self, hook: Callable[[EngineObserver], Any]) -> None:
        for observer in self.observers:
            self.runtime.run_callback(lambda observer=observer: hook(observer))  # type: ignore[misc]


def _ignore(outcome: Outcome[Any]) -> None:
    if outcome.error is not None:
        logger.debug("django-simba: background call failed: %s", outcome.error)


def _log_outage(line: str | None) -> None:
    if line is not None:
        logger.warning("django-simba: %s", line)


def _log_purge(outcome: Outcome[int]) -> None:
    if outcome.error is not None:
        logger.warning("django-simba: purging expired sessions failed: %s", outcome.error)
    elif outcome.value:
        logger.info("django-simba: purged %d expired sessions", outcome.value)


# One lock per process id for starting over in a child forked without hooks (made there, so never
# one a parent's thread held at the fork).
_reset_locks: dict[int, threading.Lock] = {}
# Engines to reset in a forked child; weak so an engine can be garbage collected.
_engines: weakref.WeakSet[Engine] = weakref.WeakSet()
_fork_hook_installed = False
_fork_hook_lock = threading.Lock()


def _track_for_fork(engine: Engine) -> None:
    global _fork_hook_installed
    _engines.add(engine)
    with _fork_hook_lock:
        if not _fork_hook_installed:
            os.register_at_fork(after_in_child=_reset_engines_in_child)
            atexit.register(_close_engines_at_exit)
            _fork_hook_installed = True


def _reset_engines_in_child() -> None:
    for engine in list(_engines):
        try:
            engine._after_fork_in_child()
        except Exception:
            logger.exception("django-simba: resetting the engine after fork failed")


def _close_engines_at_exit() -> None:
    """Close sessions at interpreter exit, so other processes take over at once."""
    for engine in list(_engines):
        if engine.started and not engine.closed:
            try:
                engine.close(timeout=1.0)
            except Exception:
                logger.exception("django-simba: closing the engine at exit failed")
