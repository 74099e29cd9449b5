"""Elections on a virtual clock: elected, revoked for every reason, take-over, callbacks."""

from __future__ import annotations

from django_simba.backends.memory import MemoryBackend

from .conftest import LEASE, RENEW, FaultyRuntime
from .virtual import Shared


def elect(runtime, engine, name="leader"):
    events = []
    election = engine.election(
        name,
        on_elected=lambda term: events.append(("elected", term.token)),
        on_revoked=lambda term: events.append(("revoked", term.token)),
    )
    return election, events


def test_a_single_candidate_is_elected_with_a_positive_token(runtime, make_engine):
    engine = make_engine(runtime)
    election, events = elect(runtime, engine)
    runtime.run_until_true(lambda: bool(events), 5)
    assert events == [("elected", 1)]
    assert election.is_leader and election.term.token == 1
    assert election.leader().session_id == engine.session_id


def test_leader_is_revoked_when_a_keep_alive_lacks_its_lease(runtime, make_engine, backend: MemoryBackend):
    engine = make_engine(runtime)
    election, events = elect(runtime, engine)
    runtime.run_until_true(lambda: election.is_leader, 5)
    thief = backend.open_session(LEASE, "thief").session_id
    assert backend.force_release("leader")
    assert backend.acquire(thief, "leader").token == 2
    runtime.run_until_true(lambda: not election.is_leader, RENEW + 0.1)
    runtime.run_until_true(lambda: ("revoked", 1) in events, 1)
    backend.close_session(thief)
    runtime.run_until_true(lambda: election.is_leader, RENEW)
    assert election.term.token == 3


def test_leader_is_revoked_when_its_deadline_passes_unreachable(runtime, make_engine):
    engine = make_engine(runtime)
    election, events = elect(runtime, engine)
    runtime.run_until_true(lambda: election.is_leader, 5)
    term = election.term
    runtime.cut = True
    deadline = term._deadline
    runtime.run_until(deadline - 1e-6)
    assert election.is_leader
    runtime.run_until(deadline)
    assert not election.is_leader and not term.is_valid()
    runtime.run_until_true(lambda: ("revoked", 1) in events, 1)


def test_leader_is_revoked_when_its_session_expires(runtime, make_engine, backend: MemoryBackend):
    engine = make_engine(runtime)
    election, events = elect(runtime, engine)
    runtime.run_until_true(lambda: election.is_leader, 5)
    backend.lose_sessions()
    runtime.run_until_true(lambda: ("revoked", 1) in events, RENEW + 0.1)
    runtime.run_until_true(lambda: len(events) == 3, RENEW)
    assert election.term.token == 2
    assert events == [("elected", 1), ("revoked", 1), ("elected", 2)]


def test_candidate_takes_over_after_the_holder_session_expires(backend: MemoryBackend, make_engine):
    leader_net = FaultyRuntime(seed=2, timeout=RENEW)
    candidate_net = FaultyRuntime(seed=3, timeout=RENEW)
    # both processes and the backend share one virtual clock: drive them together
    clock = Shared(leader_net, candidate_net)
    backend._clock = clock.now
    leader = make_engine(leader_net)
    candidate = make_engine(candidate_net)
    first, _ = elect(leader_net, leader)
    clock.run_until_true(lambda: first.is_leader, 5)
    second, _ = elect(candidate_net, candidate)
    clock.advance(RENEW)
    assert first.is_leader and not second.is_leader
    leader_net.cut = True  # the leader's process is cut off: its session expires on the backend
    cut_at = clock.now()
    took = clock.run_until_true(lambda: second.is_leader, LEASE + RENEW)
    assert took <= LEASE + RENEW / 2 + RENEW / 4  # lease + renew/2 + jitter
    assert second.term.token == 2
    assert not first.is_leader  # its local deadline passed before the take-over
    assert first.term is None and clock.now() > cut_at


def test_release_notification_triggers_immediate_take_over(backend: MemoryBackend, make_engine):
    a_net, b_net = FaultyRuntime(seed=4, timeout=RENEW), FaultyRuntime(seed=5, timeout=RENEW)
    clock = Shared(a_net, b_net)
    backend._clock = clock.now
    a, b = make_engine(a_net), make_engine(b_net)
    first, _ = elect(a_net, a)
    clock.run_until_true(lambda: first.is_leader, 5)
    second, _ = elect(b_net, b)
    clock.advance(1)
    first.close()
    took = clock.run_until_true(lambda: second.is_leader, RENEW)
    assert took < 0.001


def test_callbacks_that_raise_do_not_stop_the_engine(runtime, make_engine, backend: MemoryBackend):
    engine = make_engine(runtime)
    calls = []

    def explode(term):
        calls.append(term.token)
        raise RuntimeError("boom")

    election = engine.election("leader", on_elected=explode, on_revoked=explode)
    runtime.run_until_true(lambda: calls == [1], 5)
    backend.lose_sessions()
    runtime.run_until_true(lambda: calls == [1, 1, 2], 2 * RENEW)
    assert runtime.callback_errors == 3
    assert election.is_leader
