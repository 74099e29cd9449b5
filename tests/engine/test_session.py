"""The session: local deadlines from the send time and DRIFT, renewal, loss and reopening."""

from __future__ import annotations

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import EngineObserver

from .conftest import DRIFT, LEASE, RENEW, FaultyRuntime


def test_deadline_counts_from_the_send_time_with_drift(runtime, make_engine):
    runtime.delay = 0.4  # 0.2 s each way
    engine = make_engine(runtime)
    sent = runtime.now()
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    assert runtime.now() - sent == pytest.approx(0.4)
    assert engine.session_deadline == pytest.approx(sent + LEASE * (1 - DRIFT))


def test_keep_alive_moves_the_deadline_from_its_own_send_time(runtime, make_engine):
    engine = make_engine(runtime)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    opened_at = runtime.now()
    runtime.delay = 1.0
    runtime.run_until(opened_at + RENEW + 1.0)
    assert engine.session_deadline == pytest.approx(opened_at + RENEW + LEASE * (1 - DRIFT))


def test_term_deadline_uses_the_acquire_send_time(runtime, make_engine):
    runtime.delay = 0.2  # 0.1 s each way
    engine = make_engine(runtime)
    t0 = runtime.now()
    elected = []
    engine.election("leader", on_elected=elected.append)
    runtime.run_until_true(lambda: bool(elected), 5)
    # open sent at t0, applied at t0+0.1 (expires t0+0.1+LEASE); acquire sent at t0+0.2, applied at t0+0.3
    granted_remaining = (t0 + 0.1 + LEASE) - (t0 + 0.3)
    assert elected[0]._deadline == pytest.approx(t0 + 0.2 + granted_remaining * (1 - DRIFT))


def test_a_late_keep_alive_counts_as_failed(make_engine):
    runtime = FaultyRuntime(seed=1, timeout=3 * RENEW)  # lets a reply come back later than RENEW
    engine = make_engine(runtime)
    outcomes = []

    class Watch(EngineObserver):
        def keep_alive_done(self, seconds, ok):
            outcomes.append((round(seconds, 3), ok))

    engine.observers.append(Watch())
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    deadline = engine.session_deadline
    runtime.delay = RENEW * 1.5
    runtime.run_until_true(lambda: bool(outcomes), 3 * RENEW)
    assert outcomes == [(RENEW * 1.5, False)]
    assert engine.session_deadline == deadline  # not extended by a late reply


def test_deadline_passing_while_unreachable_ends_the_session(runtime, make_engine, backend):
    engine = make_engine(runtime)
    lost = []

    class Watch(EngineObserver):
        def session_lost(self, session_id, reason):
            lost.append(reason.value)

    engine.observers.append(Watch())
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    first = engine.session_id
    deadline = engine.session_deadline
    runtime.cut = True
    runtime.run_until(deadline - 0.001)
    assert engine.session_id == first
    runtime.run_until(deadline)
    assert engine.session_id is None
    runtime.run_until_true(lambda: bool(lost), 1)
    assert lost == ["deadline passed"]
    runtime.cut = False
    runtime.run_until_true(lambda: engine.session_id is not None, 10)
    assert engine.session_id != first


def test_an_expired_session_is_replaced_by_a_new_one(runtime, make_engine, backend: MemoryBackend):
    engine = make_engine(runtime)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    first = engine.session_id
    backend.lose_sessions()
    runtime.run_until_true(lambda: engine.session_id not in (None, first), RENEW + 1)
    assert len([s for s in backend.sessions() if s.remaining > 0]) == 1


def test_open_failures_retry_with_backoff(runtime, make_engine):
    runtime.cut = True
    engine = make_engine(runtime)
    engine.start()
    runtime.advance(30)
    assert engine.session_id is None
    assert "no reply" in str(engine.last_error)
    runtime.cut = False
    waited = runtime.run_until_true(lambda: engine.session_id is not None, RENEW + 2 * RENEW)
    assert waited <= RENEW + RENEW  # backoff is capped at the renew interval (+ one timeout)


def test_purge_runs_at_most_once_per_interval(runtime, make_engine, backend: MemoryBackend):
    crashed = backend.open_session(1.0, "crashed").session_id
    engine = make_engine(runtime, purge_interval=60.0)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    runtime.advance(2)
    assert crashed in {s.session_id for s in backend.sessions()}  # purged once at open, before expiry
    runtime.advance(60)
    assert crashed not in {s.session_id for s in backend.sessions()}
    calls = backend.calls
    runtime.advance(RENEW)
    assert backend.calls - calls == 1  # one keep-alive, no purge
