"""Engine issues the simulation found, each reduced to a scripted scenario on one virtual clock.

Each was a failure before its fix in the engine (or the token-scoped release of
the SPI); they stay as regression tests.
"""

from __future__ import annotations

from collections import deque

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import CONTEND_LANE, SESSION_LANE, Engine, EngineConfig
from django_simba.errors import LeaseLost
from django_simba.testing.runtime import Fate, VirtualRuntime

LEASE, RENEW, DRIFT = 15.0, 5.0, 0.01


class ScriptedRuntime(VirtualRuntime):
    """A virtual runtime whose network plays a script of fates, lane by lane, then is calm."""

    def __init__(self) -> None:
        super().__init__(seed=1, timeout=RENEW)
        self.script: dict[str, deque[Fate]] = {SESSION_LANE: deque(), CONTEND_LANE: deque()}

    def plan(self, lane: str) -> Fate:
        queue = self.script.get(lane)
        return queue.popleft() if queue else Fate()


@pytest.fixture
def runtime() -> ScriptedRuntime:
    return ScriptedRuntime()


@pytest.fixture
def backend(runtime: ScriptedRuntime) -> MemoryBackend:
    return MemoryBackend(timeout=RENEW, clock=runtime.now)


@pytest.fixture
def engine(runtime: ScriptedRuntime, backend: MemoryBackend) -> Engine:
    engine = Engine(backend, EngineConfig(lease_duration=LEASE, renew_interval=RENEW, drift=DRIFT), runtime)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 1)
    runtime.advance(0.1)  # the calls made at opening (a purge) are done: scripts start after them
    return engine


def test_a_queued_acquire_counts_its_term_from_when_it_was_sent(runtime, backend, engine):
    runtime.script[CONTEND_LANE].append(Fate(reply_delay=4.0))  # a slow call holds the lane for 4 s
    engine.submit(lambda: backend.members("workers"), lambda outcome: None)
    election = engine.election("alpha")
    runtime.run_until_true(lambda: election.is_leader, RENEW)
    granted = backend.owner("alpha")  # same virtual instant as the grant: the reply took no time
    assert granted is not None
    # SPEC 4: the deadline is sent_at + remaining * (1 - DRIFT), sent_at being when the request left
    assert election.term.remaining == pytest.approx(granted.remaining * (1 - DRIFT), abs=1e-6)


def test_a_term_that_lapsed_is_revoked_and_never_valid_again(runtime, backend, engine):
    events: list[tuple[str, int]] = []
    start = runtime.now()
    runtime.script[CONTEND_LANE].append(Fate(request_delay=3.0))  # the acquire lands 3 s after it left
    runtime.script[SESSION_LANE].append(Fate(lose_request=True))  # the first keep-alive is lost
    election = engine.election(
        "alpha",
        on_elected=lambda term: events.append(("elected", term.token)),
        on_revoked=lambda term: events.append(("revoked", term.token)),
    )
    runtime.run_until_true(lambda: election.is_leader, RENEW)
    term = election.term
    # granted 12 s of lease, trusted from the send time: 11.88 s. The session itself is trusted
    # until 14.85 s; its keep-alive at 5 s is lost, the retry goes at 12.5 s.
    runtime.run_until(start + 12.0)
    assert not term.is_valid()
    assert engine.session_id is not None  # the session has not passed its own deadline
    runtime.run_until(start + 13.0)  # the retried keep-alive came back listing alpha
    assert not term.is_valid(), "a term that lapsed became valid again"
    assert ("revoked", 1) in events


def test_a_late_keep_alive_reply_never_frees_a_newer_term(runtime, backend, engine):
    lock = engine.lock("gamma")
    first = lock.acquire(0)
    runtime.script[SESSION_LANE].append(Fate(reply_delay=3.0))  # the next keep-alive answers late
    keep_alive_at = runtime.now() + RENEW
    runtime.run_until(keep_alive_at + 0.5)  # applied on the backend (listing gamma: first), not answered
    lock.release()
    second = lock.acquire(0)
    assert second.token == first.token + 1
    runtime.run_until(keep_alive_at + 3.5)  # the late reply is in
    assert second.is_valid()
    holder = backend.owner("gamma")
    assert holder is not None and holder.session_id == engine.session_id, "the held term was freed"
    rival = backend.open_session(LEASE, "rival").session_id
    assert backend.acquire(rival, "gamma") is None


def test_a_release_applied_after_its_timeout_never_frees_a_newer_term(runtime, backend, engine):
    lock = engine.lock("gamma", max_hold=1.0)
    first = lock.acquire(0)
    runtime.script[CONTEND_LANE].append(Fate(request_delay=RENEW + 2))  # the release lands after its timeout
    start = runtime.now()
    runtime.run_until(start + 1.0 + RENEW + 0.1)  # the maximum hold released it; the release timed out
    assert not first.is_valid()
    with pytest.raises(LeaseLost):
        lock.release()  # forget the ended term, told it ended by its maximum hold time
    other = engine.lock("gamma")  # held with no maximum
    second = None
    for _ in range(3):  # the backend still lists the old term: the engine frees it, then takes a new one
        second = other.try_acquire()
        if second is not None:
            break
        runtime.advance(0.1)
    assert second is not None and second.token > first.token
    runtime.run_until(start + 1.0 + RENEW + 2.5)  # the late release is applied now
    assert second.is_valid()
    holder = backend.owner("gamma")
    assert holder is not None and holder.session_id == engine.session_id, "the held term was freed"
