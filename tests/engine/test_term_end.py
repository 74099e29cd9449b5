"""How a term ends on its own (its deadline, its maximum hold) and what the backend is told then.

On a virtual clock with a scripted network, every backend call the engine makes is recorded, so a
test can say which call comes first and with which session and token: a term freed late, or under
the wrong session, ends in the same grants a moment later, and only the calls tell it apart.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_simba.engine import CONTEND_LANE, SESSION_LANE, Engine, EngineConfig, EngineObserver
from django_simba.engine.term import EndReason, Term
from django_simba.errors import LeaseLost
from django_simba.spi import Renewal
from django_simba.testing.runtime import Fate

from .scripted import DRIFT, LEASE, RENEW, RecordingBackend, ScriptedRuntime
from .scripted import scripted_runtime as scripted_runtime  # the module's `runtime` fixture


def watch_session_losses(engine: Engine) -> list[tuple[str, EndReason]]:
    """The (session, reason) of every session the engine loses from now on."""
    lost: list[tuple[str, EndReason]] = []

    class Watch(EngineObserver):
        def session_lost(self, session_id: str, reason: EndReason) -> None:
            lost.append((session_id, reason))

    engine.observers.append(Watch())
    return lost


@pytest.fixture
def backend(runtime: ScriptedRuntime) -> RecordingBackend:
    return RecordingBackend(timeout=RENEW, clock=runtime.now)


@pytest.fixture
def engine(runtime: ScriptedRuntime, backend: RecordingBackend) -> Engine:
    engine = Engine(backend, EngineConfig(lease_duration=LEASE, renew_interval=RENEW, drift=DRIFT), runtime)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 1)
    runtime.advance(0.1)  # the calls made at opening (a purge) are done: scripts start after them
    return engine


def test_a_lapsed_term_ends_at_its_deadline_and_its_name_is_freed_under_its_session(runtime, backend, engine):
    start = runtime.now()
    lost = []
    lock = engine.lock("alpha", on_lost=lambda term, reason: lost.append(reason))
    backend.skew = 3.0  # the backend's clock is 3 s ahead while it grants: 3 s less of lease
    term = lock.acquire(0)
    backend.skew = 0.0
    runtime.script[SESSION_LANE].append(Fate(lose_request=True))  # the first keep-alive is lost
    # 11.9 s of lease granted, trusted for 11.78 s from the send time; the session lives to 14.85 s,
    # and the keep-alive sent again after the lost one leaves at 12.5 s
    before = len(backend.log)
    runtime.run_until(start + 12.0)
    assert engine.session_id == term.session_id  # the session lives on: this is the term's own end
    assert term.ended is EndReason.DEADLINE
    assert lost == [EndReason.DEADLINE]
    assert backend.log[before:] == [("release", term.session_id, "alpha", term.token)]
    assert backend.owner("alpha") is None  # free for others now, not at the next keep-alive


def test_an_election_whose_term_lapsed_asks_again_only_once_the_release_left(runtime, backend, engine):
    start = runtime.now()
    backend.skew = 3.0  # as above: the term is trusted for less than the session lives
    election = engine.election("alpha-e")
    runtime.run_until_true(lambda: election.is_leader, 1)
    backend.skew = 0.0
    term = election.term
    assert term is not None
    runtime.script[SESSION_LANE].append(Fate(lose_request=True))
    before = len(backend.log)
    runtime.run_until(start + 12.5)
    assert term.ended is EndReason.DEADLINE
    calls = [(call[0], call[3]) for call in backend.log[before:] if call[2] == "alpha-e"]
    # The lapsed term is given back first; the candidate's next acquire follows it, and wins again.
    assert calls[:2] == [("release", term.token), ("acquire", None)]
    assert election.is_leader and election.term is not None and election.term.token > term.token


def test_a_maximum_hold_frees_the_name_at_once_under_the_term_session(runtime, backend, engine):
    lock = engine.lock("beta", max_hold=1.0)
    term = lock.acquire(0)
    runtime.run_until(runtime.now() + 1.0 + 0.01)
    assert term.ended is EndReason.MAX_HOLD
    assert backend.log[-1] == ("release", term.session_id, "beta", term.token)
    assert backend.owner("beta") is None  # another process may take it now, not at the next keep-alive


def test_a_name_released_in_the_background_goes_at_once_to_the_next_local_waiter(runtime, backend, engine):
    lock = engine.lock("gamma", max_hold=1.0)
    first = lock.acquire(0)
    election = engine.election("gamma")  # waits here, behind the lock's term
    start = runtime.now()
    runtime.run_until(start + 1.0)
    assert first.ended is EndReason.MAX_HOLD
    assert election.term is not None and election.term.token == first.token + 1  # no pause between


def test_a_failed_background_release_is_made_again_before_the_next_local_waiter_is_served(
    runtime, backend, engine
):
    lock = engine.lock("gamma", max_hold=1.0)
    first = lock.acquire(0)
    election = engine.election("gamma")
    runtime.script[CONTEND_LANE].append(Fate(lose_request=True))  # the release never lands (not logged)
    start = runtime.now()
    before = len(backend.log)
    runtime.run_until(start + 1.0 + RENEW + 0.5)  # the release timed out, and then some
    releases = [call for call in backend.log[before:] if call[0] == "release"]
    assert releases == [("release", first.session_id, "gamma", first.token)]  # made again
    assert election.term is not None and election.term.token == first.token + 1


def test_no_acquire_of_a_name_leaves_while_its_release_is_on_its_way(runtime, backend, engine):
    lock = engine.lock("delta", max_hold=1.0)
    lock.acquire(0)
    runtime.script[CONTEND_LANE].append(Fate(request_delay=1.0))  # the release takes a second to land
    start = runtime.now()
    runtime.run_until(start + 1.5)
    before = len(backend.log)
    assert engine.lock("delta").try_acquire() is None  # the name is busy here: not asked for
    assert [call[0] for call in backend.log[before:]] == []
    runtime.run_until(start + 2.5)
    assert backend.owner("delta") is None


def test_observers_see_each_term_start_and_end_with_its_kind_and_reason(runtime, backend, engine):
    seen: list[tuple[Any, ...]] = []

    class Watch(EngineObserver):
        def term_started(self, kind: str, term: Term) -> None:
            seen.append(("started", kind, term))

        def term_ended(self, kind: str, term: Term, reason: EndReason) -> None:
            seen.append(("ended", kind, term, reason))

    engine.observers.append(Watch())
    lock = engine.lock("epsilon")
    term = lock.acquire(0)
    lock.release()
    runtime.advance(0.1)  # observers run on the callback lane
    assert seen == [("started", "lock", term), ("ended", "lock", term, EndReason.RELEASED)]


def test_a_term_granted_after_its_waiter_gave_up_is_freed_under_its_session(runtime, backend, engine):
    runtime.script[CONTEND_LANE].append(Fate(request_delay=1.0))  # the acquire lands a second later
    election = engine.election("zeta")
    runtime.advance(0.5)
    election.close()  # gives up while its acquire is on its way
    before = len(backend.log)
    runtime.run_until(runtime.now() + 1.0)
    session = engine.session_id
    assert backend.log[before:] == [("acquire", session, "zeta", None), ("release", session, "zeta", 1)]
    assert backend.owner("zeta") is None


def test_a_watch_set_for_a_refused_waiter_goes_at_its_grant_where_idle_watches_cost(runtime, backend, engine):
    assert not backend.idle_watches_are_free
    rival = backend.open_session(LEASE, "rival").session_id
    held = backend.acquire(rival, "eta")
    assert held is not None
    election = engine.election("eta")
    runtime.advance(0.1)
    assert ("watch", None, "eta", None) in backend.log
    backend.release(rival, "eta", held.token)  # notified: the waiter here takes it
    runtime.advance(0.1)
    assert election.is_leader
    assert [call[0] for call in backend.log if call[0] in ("watch", "unwatch")] == ["watch", "unwatch"]


def test_a_session_past_its_deadline_ends_its_terms_and_is_closed_on_the_backend(runtime, backend, engine):
    lost = watch_session_losses(engine)
    session = engine.session_id
    deadline = engine.session_deadline
    term = engine.lock("theta").acquire(0)
    runtime.session_lane_cut = True  # keep-alives are lost; the contend lane still works
    runtime.run_until(deadline - 0.01)
    assert term.is_valid() and backend.owner("theta") is not None
    runtime.run_until(deadline + 0.01)
    assert term.ended is EndReason.DEADLINE
    assert lost == [(session, EndReason.DEADLINE)]
    assert ("close_session", session, "", None) in backend.log  # it may still be live there: closed
    assert backend.owner("theta") is None  # so its names are free at once, not when it expires


def test_on_lost_is_not_called_for_a_term_released_by_its_holder(runtime, backend, engine):
    lost: list[EndReason] = []
    lock = engine.lock("mu", on_lost=lambda term, reason: lost.append(reason))
    term = lock.acquire(0)
    lock.release()
    runtime.advance(0.1)  # callbacks run on the callback lane
    assert lost == []
    assert backend.log[-1] == ("release", term.session_id, "mu", term.token)  # that term, no other


def test_a_release_while_an_acquire_of_the_name_is_on_its_way_follows_it(runtime, backend, engine):
    seen: list[Any] = []

    class Watch(EngineObserver):
        def term_ended(self, kind: str, term: Term, reason: EndReason) -> None:
            seen.append((kind, term, reason))

    engine.observers.append(Watch())
    lost: list[EndReason] = []
    lock = engine.lock("nu", on_lost=lambda term, reason: lost.append(reason))
    term = lock.acquire(0)
    with engine.mutex:
        slot = engine.lines.slots["nu"]
        slot.busy = "acquire"  # as if an attempt for the name were on its way
    lock.release()
    runtime.advance(0.1)
    assert term.ended is EndReason.RELEASED
    assert seen == [("lock", term, EndReason.RELEASED)] and lost == []
    assert backend.owner("nu") is not None  # not freed beside the attempt on its way ...
    with engine.mutex:
        assert slot.deferred == [(term.session_id, term.token)]
        slot.busy = None
        engine.lines.kick(slot)  # ... but once it is over
    runtime.advance(0.1)
    assert backend.log[-1] == ("release", term.session_id, "nu", term.token)
    assert backend.owner("nu") is None


def test_a_release_at_the_deadline_before_its_timer_ran_ends_the_term_as_lapsed(runtime, backend, engine):
    lock = engine.lock("xi")
    backend.skew = 3.0  # granted 3 s less than the session has: its deadline comes first
    term = lock.acquire(0)
    backend.skew = 0.0
    runtime.clock = term._deadline  # the deadline is now, and its timer has not run yet
    with pytest.raises(LeaseLost):
        lock.release()
    assert term.ended is EndReason.DEADLINE
    runtime.advance(0)
    assert backend.log[-1] == ("release", term.session_id, "xi", term.token)


def test_a_keep_alive_reply_at_a_term_deadline_ends_it_and_goes_on_with_the_others(runtime, backend, engine):
    first = engine.lock("omicron")
    first.acquire(0)
    first.release()  # a slot with no term, first in line
    backend.skew = 3.0  # granted 3 s less than the session has: its deadline comes first
    term = engine.lock("pi").acquire(0)
    backend.skew = 0.0
    busy = engine.lock("rho")
    held = busy.acquire(0)
    session = term.session_id
    runtime.clock = term._deadline  # the reply comes at the deadline, before the term's timer
    renewal = Renewal(10.0, {"rho": held.token, "stray": 7})
    with engine.mutex:
        engine.lines.slot("stray")
        engine.lines.reconcile(session, runtime.clock - 1.0, renewal, runtime.clock + 10.0)
    runtime.advance(0)
    assert term.ended is EndReason.DEADLINE  # never extended back to life
    calls = backend.log[-2:]
    assert ("release", session, "pi", term.token) in calls  # freed, under its session
    assert ("release", session, "stray", 7) in calls  # and the rest of the listing was read


def test_a_keep_alive_listing_a_name_whose_attempt_is_on_its_way_leaves_it_alone(runtime, backend, engine):
    session = engine.session_id
    with engine.mutex:
        slot = engine.lines.slot("sigma")
        slot.busy = "acquire"
        engine.lines.reconcile(session, runtime.now(), Renewal(10.0, {"sigma": 3}), runtime.now() + 10.0)
        assert slot.deferred == [] and slot.last_token == 0
        slot.busy = None


def test_an_acquire_answered_session_expired_loses_the_session_at_once(runtime, backend, engine):
    lost = watch_session_losses(engine)
    session = engine.session_id
    backend.lose_sessions()  # the backend forgot the session: the next call says so
    engine.election("tau")
    runtime.advance(0.1)  # long before the next keep-alive
    assert lost == [(session, EndReason.SESSION_EXPIRED)]
