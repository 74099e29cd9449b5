"""The lines of names: who waits here for each name, who holds it, and every grant of a term.

Each name has a :class:`Slot`: its local holder and term, its local waiters in order, and
the one backend operation in flight for it. Local contenders are served one at a time, and
a release always reaches the backend before the next local acquire. Every term this
process gets passes :meth:`Lines.grant`, the one gate that refuses a token not strictly
above the last granted here for the name, whichever path offered it (an acquire's reply,
a keep-alive listing, a hand-over).

This module is longer than most (about 500 lines): the paths that start, hand over, renew
and end a term share the slot's state, and reading them side by side is how their
interplay is checked. Timing policy is in :mod:`.pacing`; the session in :mod:`.keeper`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import EngineClosed
from ..spi import Grant, Notification, NotificationKind, Released, Renewal, SessionExpired, redact
from .contender import Contender
from .context import Context, ignore
from .keeper import Session, SessionKeeper
from .pacing import Pacing
from .runtime import CONTEND_LANE, DONE, Outcome
from .slot import FIRST_POLL_DELAY, Slot
from .term import EndReason, Term

logger = logging.getLogger("django_simba.engine")


class Lines:
    """Every name this process contends for (methods: mutex held, unless they say otherwise)."""

    def __init__(
        self, context: Context, keeper: SessionKeeper, wait_for_session: Callable[[float | None], str]
    ):
        self.context = context
        self.keeper = keeper
        self.backend = context.backend
        self.pacing = Pacing(context.backend, context.config, context.runtime)
        self._wait_for_session = wait_for_session
        self.slots: dict[str, Slot] = {}
        self._lingering: set[str] = set()  # names still watched with nobody here waiting
        # The grant gate's floor of names whose slot was dropped: name -> (last token, dropped at).
        self._retired: dict[str, tuple[int, float]] = {}

    def slot(self, name: str) -> Slot:
        slot = self.slots.get(name)
        if slot is None:
            slot = self.slots[name] = Slot(name)
            retired = self._retired.pop(name, None)
            if retired is not None:
                slot.last_token = retired[0]
        return slot

    def held_terms(self) -> list[Term]:
        return [slot.term for slot in self.slots.values() if slot.term is not None]

    # -- joining and leaving a line --------------------------------------------------------

    def enqueue(self, contender: Contender, *, delay: float | None = None) -> None:
        """Put ``contender`` in line for its name."""
        if self.keeper.closed:
            raise EngineClosed("this engine was closed")
        slot = self.slot(contender.name)
        if contender not in slot.waiting:
            slot.waiting.append(contender)
        if slot.holder is not None:
            contender.on_refused()  # held here by another contender: decided without asking the backend
        if delay is None:
            self.kick(slot)
        elif slot.timer is None and slot.busy is None:
            slot.timer = self.context.runtime.call_later(delay, lambda: self._kick_locked(slot))

    def withdraw(self, contender: Contender) -> None:
        """Take ``contender`` out of line."""
        slot = self.slots.get(contender.name)
        if slot is None:
            return
        if contender in slot.waiting:
            slot.waiting.remove(contender)
        attempt_was_lent = contender.lent_session is not None
        if attempt_was_lent:
            # It gave up before making the attempt it was lent: nobody else will make it.
            contender.lent_session = None
            slot.busy = None
        if not slot.waiting:
            slot.cancel_timer()
            session = self.keeper.session
            if not (contender.waits and session is not None and self.backend.hands_over):
                self._unwatch(slot)
            elif slot.busy is None:
                self._stop_waiting(slot, session.id)
            elif slot.watched:
                # An attempt on its way leaves the line on its reply; a quiet name is unwatched later.
                self._lingering.add(slot.name)
        elif attempt_was_lent:
            self.kick(slot)

    # -- attempts --------------------------------------------------------------------------

    def _kick_locked(self, slot: Slot) -> None:
        with self.context.mutex:
            slot.timer = None
            self.kick(slot)

    def kick(self, slot: Slot) -> None:
        """Start the name's next backend operation when none is in flight: a release put off
        while another was (:meth:`_free`), else an acquire for the first waiter."""
        if slot.busy is None and slot.deferred:
            session_id, token = slot.deferred.pop(0)
            self._release_in_background(slot, session_id, token)
            return
        session = self.keeper.session
        if slot.holder is not None or slot.busy is not None or not slot.waiting or session is None:
            return
        context = self.context
        courtesy = slot.courtesy_until - context.now()
        if courtesy > 0:
            if slot.timer is None:
                slot.timer = context.runtime.call_later(courtesy, lambda: self._kick_locked(slot))
            return
        slot.cancel_timer()
        slot.busy = "acquire"
        slot.poked = False
        first = slot.waiting[0]
        if first.take_attempt(session.id):
            return  # its own thread makes it: make_lent_attempt
        session_id, name, wait, sent = session.id, slot.name, first.waits, context.now()
        context.runtime.submit(
            CONTEND_LANE,
            lambda: self.backend.acquire(session_id, name, wait=wait),
            lambda outcome: self.context.with_mutex(self._on_acquired, slot, session_id, sent, outcome),
        )

    def acquire_now(self, contender: Contender, session_wait: float | None) -> BaseException | None:
        """Try once in the calling thread (mutex not held); if refused, leave ``contender`` in line.

        Returns the error of the attempt, if it failed (the contender stays in line). A contender
        that does not wait (a one-shot try) never stays in line: a refusal, an error, or a name
        busy here is its answer, and nothing here tries for it after it returned (a retry timer,
        a watch or a release kicking its line would take the name for nobody, then free it).
        """
        session_id = self._wait_for_session(session_wait)
        context = self.context
        with context.mutex:
            slot = self.slot(contender.name)
            session = self.keeper.session
            inline = (
                slot.holder is None
                and slot.busy is None
                and not slot.waiting
                and session is not None
                and session.id == session_id
                and context.now() >= slot.courtesy_until
            )
            if not inline:
                if contender.waits:
                    self.enqueue(contender)
                elif self.keeper.closed:
                    raise EngineClosed("this engine was closed")
                return None
            slot.busy = "acquire"
            sent = context.now()
        outcome = self._acquire_outcome(session_id, contender.name, contender.waits)
        with context.mutex:
            slot.waiting.appendleft(contender)
            self._on_acquired(slot, session_id, sent, outcome)
            if not contender.waits and contender in slot.waiting:
                self.withdraw(contender)  # in the reply's mutex: no retry it set off can start first
        return outcome.error

    def make_lent_attempt(self, contender: Contender, session_id: str) -> BaseException | None:
        """Make, in the calling thread, the attempt :meth:`kick` lent to ``contender``; its error."""
        with self.context.mutex:
            slot = self.slot(contender.name)
            sent = self.context.now()
        outcome = self._acquire_outcome(session_id, contender.name, contender.waits)
        with self.context.mutex:
            self._on_acquired(slot, session_id, sent, outcome)
        return outcome.error

    def _acquire_outcome(self, session_id: str, name: str, wait: bool) -> Outcome[Grant | None]:
        try:
            return Outcome(value=self.backend.acquire(session_id, name, wait=wait))
        except Exception as error:
            return Outcome(error=error)

    def _on_acquired(self, slot: Slot, session_id: str, sent: float, outcome: Outcome[Grant | None]) -> None:
        """Handle an acquire's reply; then free what was given up while it was on its way."""
        self._settle_acquire(slot, session_id, sent, outcome)
        if slot.busy is None and slot.deferred:
            self.kick(slot)

    def _settle_acquire(
        self, slot: Slot, session_id: str, sent: float, outcome: Outcome[Grant | None]
    ) -> None:
        context = self.context
        sent = outcome.sent_at(sent)
        slot.busy = None
        if outcome.error is None:
            self.pacing.measure_acquire(context.now() - sent)
            context.answered()
        session = self.keeper.session
        if session is None or session.id != session_id:
            self.kick(slot)  # the grant, if any, belongs to a session we already gave up
            return
        if isinstance(outcome.error, SessionExpired):
            self.keeper.lose(session_id, EndReason.SESSION_EXPIRED)
            return
        if outcome.error is not None:
            # Maybe applied with its reply lost: a keep-alive will list it and we free it then.
            context.failed(outcome.error, f"acquire of {slot.name!r} failed: {outcome.error}")
            for contender in list(slot.waiting):
                contender.on_attempt_failed(outcome.error)
            self._retry_later(slot, self.pacing.poll_delay(slot))
            return
        grant = outcome.value
        if grant is None:
            slot.wanted_at = context.now()  # refused: another process holds it, and may want it again
            if not slot.waiting:
                self._stop_waiting(slot, session_id)  # its waiter gave up while it was on its way
                return
            for contender in list(slot.waiting):
                contender.on_refused()
            if not any(contender.waits for contender in slot.waiting):
                slot.poked = False
                return  # one-shot tries: the refusal is their answer, and nothing here looks again
            if slot.poked:  # released while this attempt was on its way: it may be free now
                self.kick(slot)
            elif not self._watch(slot):
                self._retry_later(slot, self.pacing.retry_delay(slot))
            return
        if slot.term is not None and slot.term.token == grant.token:
            return  # the term held here, asked for again: nothing to take, and nothing to free
        if not self.grant(slot, session_id, grant.token, context.config.trusted_until(sent, grant.remaining)):
            # The backend still has our previous term (its release failed): free it, then retry.
            self._free(slot, session_id, grant.token)

    def _retry_later(self, slot: Slot, delay: float) -> None:
        if (slot.waiting or slot.deferred) and slot.timer is None:
            slot.timer = self.context.runtime.call_later(delay, lambda: self._kick_locked(slot))

    # -- the grant gate ----------------------------------------------------------------------

    def grant(self, slot: Slot, session_id: str, token: int, deadline: float) -> bool:
        """A new term of the name for this process: to the first waiter still here.

        The one gate every term of this process passes: a token not strictly above the last one
        granted here for the name is refused (False), so no two local terms ever share a token.
        """
        if token <= slot.last_token:
            return False
        context = self.context
        slot.last_token = token
        slot.backoff = FIRST_POLL_DELAY
        term = Term(slot.name, token, session_id, deadline, context.now, context.runtime.pid, context.pid)
        while slot.waiting:
            contender = slot.waiting.popleft()
            slot.holder, slot.term, slot.granted_at = contender, term, context.now()
            if contender.on_granted(term):
                self._arm_term(slot, term)
                if not slot.waiting and (slot.watched or slot.name in self._lingering):
                    self._unwatch_unless_contended(slot)
                if context.observers:  # every grant comes here
                    context.notify_observers("term_started", contender.kind, term)
                return True
        slot.holder = slot.term = None  # every waiter gave up meanwhile
        self._free(slot, session_id, token)
        return True

    def _take_handed(self, slot: Slot, session: Session, token: int) -> None:
        """A release gave the name to our session, with ``token``."""
        if token <= slot.last_token or slot.holder is not None:
            return  # a term we already have, or had (the grant gate would refuse it too)
        if not slot.waiting:
            # Nobody here wants it any more: pass it on, and never take that term afterwards.
            slot.last_token = token
            name, session_id = slot.name, session.id
            self.context.runtime.submit(
                CONTEND_LANE, lambda: self.backend.release(session_id, name, token), ignore
            )
            return
        if slot.busy is not None:
            slot.poked = True  # the attempt on its way, or the one right after it, reports the term
            return
        # A handed term lasts as long as the session: the session's own deadline bounds it.
        self.grant(slot, session.id, token, session.deadline)

    def _stop_waiting(self, slot: Slot, session_id: str) -> None:
        """Nobody here waits for the name: leave the backend's line, so no release hands it to us.

        The watch goes only once out of line: a hand-over just before is still heard (and passed on).
        """
        if not self.backend.hands_over:
            return
        slot.busy = "leave"
        slot.op += 1
        name, op = slot.name, slot.op

        def left(outcome: Outcome[None]) -> None:
            with self.context.mutex:
                if slot.op != op:
                    return  # a release overtook it: the slot is that release's now
                slot.busy = None
                if slot.waiting or slot.deferred:
                    self.kick(slot)
                if not slot.waiting:
                    self._unwatch_unless_contended(slot)

        self.context.runtime.submit(CONTEND_LANE, lambda: self.backend.stop_waiting(session_id, name), left)

    # -- terms ending ------------------------------------------------------------------------

    def _arm_term(self, slot: Slot, term: Term) -> None:
        """Call back at the term's deadline, so it ends on time even if the session lives on."""

        def check() -> None:
            with self.context.mutex:
                if slot.term is not term:
                    return
                if self.context.now() >= term._deadline:
                    self._lapse(slot, term.session_id)
                else:
                    self._arm_term(slot, term)

        slot.term_timer = self.context.runtime.call_later(term._deadline - self.context.now(), check)

    def _lapse(self, slot: Slot, session_id: str) -> None:
        """A term's own deadline passed without renewal: end it and give the name back."""
        term, holder = self._detach(slot)
        if term is None:
            return
        session = self.keeper.session
        ours = session is not None and session.id == session_id
        # The release leaves before the holder hears of the end: a holder that asks again at
        # once (an election) then waits behind it, as every local acquire does.
        if ours:
            self._free(slot, session_id, term.token)
        if holder is not None and term._end(EndReason.DEADLINE):
            self._report_end(holder, term, EndReason.DEADLINE)
        if not ours:
            self.kick(slot)

    def end_term(self, slot: Slot, reason: EndReason) -> None:
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
        """Every end of a term passes here, once: a loss is logged, then the holder and the observers hear."""
        if reason.is_loss:
            logger.warning(
                "django-simba: %s %r lost its term, token %d (%s)",
                holder.kind,
                term.name,
                term.token,
                reason.explained,
            )
        holder.on_ended(term, reason)
        if self.context.observers:
            self.context.notify_observers("term_ended", holder.kind, term, reason)

    # -- releases ----------------------------------------------------------------------------

    def release_now(self, contender: Contender, term: Term) -> EndReason:
        """End ``term`` and free its name on the backend, in the calling thread (mutex not held).

        Returns how the term ended: RELEASED, or how it had ended before (lost, expired, its
        maximum hold time...), which the release itself may be the first to learn (an operator
        force-released the name).
        """
        context = self.context
        with context.mutex:
            slot = self.slots.get(contender.name)
            if slot is None or slot.holder is not contender or slot.term is not term:
                return term.ended or EndReason.TAKEN  # ended already
            if term._deadline <= context.now():
                self._lapse(slot, term.session_id)  # its timer has not come round yet
                return EndReason.DEADLINE
            session = self.keeper.session
            self._detach(slot)
            term._end(EndReason.RELEASED)  # invalid at once; reported once the backend answered
            if session is not None and session.id == term.session_id and not self._may_release(slot):
                # An acquire or a release of the name is on its way: never two at once (its reply
                # would let out a second acquire). The release follows it, and cannot tell
                # whether the term was still held: say released.
                self._report_end(contender, term, EndReason.RELEASED)
                self._free(slot, term.session_id, term.token)
                return EndReason.RELEASED
            if session is None or session.id != term.session_id:
                self._report_end(contender, term, EndReason.RELEASED)
                self.pacing.offer_to_others(slot, context.now())
                self.kick(slot)
                return EndReason.RELEASED
            slot.busy = "release"
            slot.op += 1  # a leave on its way no longer owns the slot: its reply changes nothing
        released: Released | None = None
        outcome: Outcome[None] = DONE
        try:
            released = self.backend.release(term.session_id, term.name, term.token)
        except Exception as error:
            outcome = Outcome(error=error)
        with context.mutex:
            if released is not None:
                if released.held is False:
                    term._lost_before_release()
                if released.contended:  # a polled backend saw another session turned away during the term
                    slot.wanted_at = context.now()
            reason = term.ended or EndReason.RELEASED
            self._report_end(contender, term, reason)
            self.pacing.offer_to_others(slot, context.now())
            self._on_released(slot, outcome)
        return reason

    def release_later(self, contender: Contender, term: Term, reason: EndReason) -> None:
        """End ``term`` now and free its name from the contend lane (a timer, an async caller)."""
        slot = self.slots.get(contender.name)
        if slot is None or slot.holder is not contender or slot.term is not term:
            return
        session = self.keeper.session
        self.end_term(slot, reason)
        if session is None or session.id != term.session_id:
            self.kick(slot)
            return
        self._free(slot, term.session_id, term.token)

    @staticmethod
    def _may_release(slot: Slot) -> bool:
        """Nothing is on its way for the name, or only a leave of its line (a release may overtake it)."""
        return slot.busy is None or slot.busy == "leave"

    def _free(self, slot: Slot, session_id: str, token: int) -> None:
        """Free a term of ours on the backend now, or after the acquire or release in flight for it."""
        if self._may_release(slot):
            self._release_in_background(slot, session_id, token)
        elif (session_id, token) not in slot.deferred:
            slot.deferred.append((session_id, token))

    def _release_in_background(self, slot: Slot, session_id: str, token: int) -> None:
        slot.busy = "release"
        slot.op += 1
        name = slot.name
        self.context.runtime.submit(
            CONTEND_LANE,
            lambda: self.backend.release(session_id, name, token),
            lambda outcome: self.context.with_mutex(self._on_released, slot, outcome),
        )

    def _on_released(self, slot: Slot, outcome: Outcome[Any]) -> None:
        slot.busy = None
        if outcome.error is not None:
            logger.warning("django-simba: release of %r failed: %s", slot.name, redact(outcome.error))
            # Back off: at once, the next attempt would find the same term, fail to free it again...
            self._retry_later(slot, self.pacing.poll_delay(slot))
            return
        self.kick(slot)

    # -- the session's life (hooks of the keeper) ---------------------------------------------

    def session_opened(self, session: Session) -> None:
        for slot in self.slots.values():
            self.kick(slot)

    def session_lost(self, session_id: str, reason: EndReason) -> None:
        for slot in self.slots.values():
            slot.cancel_timer()
            if slot.term is not None:
                self.end_term(slot, reason)

    def close(self) -> None:
        """The engine closes: every term ends, every waiter wakes with EngineClosed."""
        for slot in self.slots.values():
            slot.cancel_timer()
            waiting = list(slot.waiting)
            slot.waiting.clear()
            for contender in waiting:
                contender.on_engine_closed()
            if slot.term is not None:
                self.end_term(slot, EndReason.CLOSED)

    def reconcile(self, session_id: str, sent: float, renewal: Renewal, deadline: float | None) -> None:
        """Match a keep-alive reply against local terms: extend, end lost ones, free orphans."""
        now = self.context.now()
        for slot in self.slots.values():
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
                self.end_term(slot, EndReason.TAKEN)
                self.kick(slot)
        for name, token in renewal.owned.items():
            slot = self.slot(name)
            if slot.busy is not None or token < slot.last_token:
                continue  # in flight, or a listing older than a term we since gave back
            if slot.term is not None and slot.term.token >= token:
                continue  # held here, with this term or a newer one
            if (
                self.backend.hands_over
                and slot.waiting
                and slot.holder is None
                and deadline is not None
                and self.grant(slot, session_id, token, deadline)
            ):
                continue  # handed to us: its notification is late
            # Ours on the backend, nobody's here (a reply lost, a failed release, a term already
            # granted here once): free that term, and never take it afterwards.
            slot.last_token = max(slot.last_token, token)
            self._free(slot, session_id, token)
        self._drop_quiet_watches()
        self._drop_idle_slots(now)

    # -- forgetting names nobody here uses ---------------------------------------------------

    def _drop_idle_slots(self, now: float) -> None:
        """Forget the slots of names nobody here holds, waits for or has anything on its way for.

        A process that locks a name per object would otherwise keep a slot for every name it
        ever used, and walk them all at every keep-alive. Only the grant gate's floor outlives
        the slot, for one lease: a listing or a hand-over about an older term of the name could
        still arrive that long after (a later keep-alive's reply no longer lists a term released
        before it was sent), and must still be refused.
        """
        lease = self.context.config.lease_duration
        retired = self._retired
        for name in [name for name, slot in self.slots.items() if self._idle(slot, now)]:
            slot = self.slots.pop(name)
            if slot.last_token:
                retired[name] = (slot.last_token, now)
        # Kept in the order they were dropped (a name used again leaves it): the oldest go first.
        while retired:
            name, (_, dropped) = next(iter(retired.items()))
            if now - dropped <= lease:
                break
            del retired[name]

    def _idle(self, slot: Slot, now: float) -> bool:
        return (
            slot.holder is None
            and slot.term is None
            and not slot.waiting
            and slot.busy is None
            and not slot.deferred
            and slot.timer is None
            and slot.term_timer is None
            and not slot.watched
            and slot.name not in self._lingering
            and now >= slot.courtesy_until
            and not self.pacing.contended(slot, now)
        )

    def on_notification(self, event: Notification) -> None:
        if event.kind is NotificationKind.RELEASED:
            slots: Iterable[Slot] = [self.slots[event.name]] if event.name in self.slots else []
        elif event.kind is NotificationKind.RESYNC:
            slots = list(self.slots.values())
        else:
            slots = []
        session = self.keeper.session
        if (  # handed to another session, the name is held: nothing to do here
            event.kind is NotificationKind.HANDED_OVER
            and session is not None
            and event.session_id == session.id
            and event.name in self.slots
        ):
            self._take_handed(self.slots[event.name], session, event.token)
        for slot in slots:
            if slot.waiting and slot.holder is None:
                slot.backoff = FIRST_POLL_DELAY
                if slot.busy is not None:
                    slot.poked = True
                self.kick(slot)

    # -- watches -----------------------------------------------------------------------------

    def _watch(self, slot: Slot) -> bool:
        """Start watching the name; True when a new watch was asked for (it retries once set)."""
        if not self.backend.notifies or slot.watched or self.backend.hands_over_always:
            return False  # hands_over_always: the line itself tells a waiter it got the name
        slot.watched = True
        name = slot.name

        def watching(outcome: Outcome[None]) -> None:
            # A release between the refusal and the watch would go unnoticed: look once more.
            with self.context.mutex:
                if outcome.error is not None:
                    slot.watched = False
                if slot.holder is None and slot.busy is None:
                    self.kick(slot)
                if slot.busy is None:
                    self._retry_later(slot, self.pacing.retry_delay(slot))

        self.context.runtime.submit(CONTEND_LANE, lambda: self.backend.watch_lease(name), watching)
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
            and self.pacing.contended(slot, self.context.now())
        ):
            self._lingering.add(slot.name)
        else:
            self._unwatch(slot)

    def _drop_quiet_watches(self) -> None:
        for name in list(self._lingering):
            slot = self.slots[name]
            if slot.waiting:
                self._lingering.discard(name)  # in use again: unwatched with its waiters
            elif not self.pacing.contended(slot, self.context.now()):
                self._unwatch(slot)

    def _unwatch(self, slot: Slot) -> None:
        self._lingering.discard(slot.name)
        if slot.watched:
            slot.watched = False
            name = slot.name
            self.context.runtime.submit(CONTEND_LANE, lambda: self.backend.unwatch_lease(name), ignore)
