"""Renewal: when a keep-alive counts, when it is sent again, and how an expired session ends."""

from __future__ import annotations

import logging

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import Engine, EngineConfig, EngineObserver
from django_simba.engine.term import EndReason

from .conftest import DRIFT, LEASE, RENEW, FaultyRuntime


class Watch(EngineObserver):
    def __init__(self) -> None:
        self.keep_alives: list[tuple[float, bool]] = []
        self.lost: list[tuple[str, EndReason]] = []

    def keep_alive_done(self, seconds: float, ok: bool) -> None:
        self.keep_alives.append((round(seconds, 6), ok))

    def session_lost(self, session_id: str, reason: EndReason) -> None:
        self.lost.append((session_id, reason))


def test_a_keep_alive_answered_in_exactly_a_renew_interval_counts(make_engine):
    runtime = FaultyRuntime(seed=1, timeout=3 * RENEW)
    engine = make_engine(runtime)
    watch = Watch()
    engine.observers.append(watch)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    deadline = engine.session_deadline
    runtime.delay = RENEW  # half a renew interval each way: the reply comes back right at the bound
    runtime.run_until_true(lambda: bool(watch.keep_alives), 3 * RENEW)
    assert watch.keep_alives == [(RENEW, True)]
    assert engine.session_deadline > deadline


def test_a_lost_keep_alive_is_sent_again_after_half_a_renew_interval(runtime, make_engine, caplog):
    caplog.set_level(logging.WARNING, logger="django_simba.engine")
    engine = make_engine(runtime)
    watch = Watch()
    engine.observers.append(watch)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    opened = runtime.now()
    first = engine.session_id
    runtime.cut = True
    runtime.run_until(opened + RENEW + 0.1)  # the keep-alive is on its way, and lost
    runtime.cut = False
    # it times out after RENEW (the runtime's timeout); the next leaves RENEW / 2 later
    runtime.run_until(opened + 2 * RENEW + RENEW / 2 - 0.01)
    assert watch.keep_alives == [(RENEW, False)]
    assert "no reply" in str(engine.last_error)
    assert f"keep-alive of session {first} failed: no reply" in caplog.text
    assert "answers again after" not in caplog.text
    runtime.run_until(opened + 2 * RENEW + RENEW / 2 + 0.01)
    assert watch.keep_alives == [(RENEW, False), (0.0, True)]
    assert engine.session_id == first
    assert "the memory backend answers again after" in caplog.text  # the outage is over, and said so
    assert engine.session_deadline == opened + 2.5 * RENEW + LEASE * (1 - DRIFT)


def test_a_session_the_backend_expired_ends_its_terms_as_expired(runtime, make_engine, backend):
    engine = make_engine(runtime)
    watch = Watch()
    engine.observers.append(watch)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    first = engine.session_id
    term = engine.lock("iota").acquire(0)
    backend.lose_sessions()
    runtime.run_until_true(lambda: bool(watch.lost), RENEW + 1)
    assert watch.lost == [(first, EndReason.SESSION_EXPIRED)]
    assert term.ended is EndReason.SESSION_EXPIRED


def test_a_held_term_lives_as_long_as_its_keep_alives_come_in_time(runtime, make_engine):
    engine = make_engine(runtime)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    term = engine.lock("kappa").acquire(0)
    runtime.advance(3 * LEASE)
    assert term.is_valid()
    assert term.remaining > LEASE * (1 - DRIFT) - RENEW  # extended by the last keep-alive


def test_a_late_keep_alive_extends_no_term_and_the_next_goes_half_an_interval_later(make_engine):
    runtime = FaultyRuntime(seed=1, timeout=3 * RENEW)  # lets a reply come back later than RENEW
    engine = make_engine(runtime)
    done_at: list[float] = []

    class When(EngineObserver):
        def keep_alive_done(self, seconds: float, ok: bool) -> None:
            done_at.append(runtime.now())

    engine.observers.append(When())
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    term = engine.lock("lambda").acquire(0)
    deadline = runtime.now() + term.remaining
    runtime.delay = RENEW * 1.2  # late, yet the retry half an interval later is before the deadline
    runtime.run_until_true(lambda: bool(done_at), 3 * RENEW)
    runtime.delay = 0.0
    assert runtime.now() + term.remaining == deadline  # not extended by a late reply
    runtime.run_until_true(lambda: len(done_at) == 2, RENEW)
    assert done_at[1] - done_at[0] == RENEW / 2  # sent again half an interval after the late reply


def test_keep_alives_follow_a_session_shorter_than_asked(runtime, caplog):
    """A server that grants 6 s where 15 are asked (ZooKeeper's maxSessionTimeout): a keep-alive
    every 5 s would let the session pass its deadline (5.94 s) after every grant it missed by
    a hair, a loss loop. They follow the grant: every 6 * 5 / 15 = 2 s, and it is said once."""
    caplog.set_level(logging.WARNING, logger="django_simba.engine")
    backend = MemoryBackend(timeout=RENEW, clock=runtime.now, max_session=6.0)
    engine = Engine(backend, EngineConfig(lease_duration=LEASE, renew_interval=RENEW, drift=DRIFT), runtime)
    watch = Watch()
    sent_at: list[float] = []
    keep_alive = backend.keep_alive
    backend.keep_alive = lambda *args: sent_at.append(runtime.now()) or keep_alive(*args)  # type: ignore[method-assign]
    engine.observers.append(watch)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    opened_at, first = runtime.now(), engine.session_id
    term = engine.lock("mu").acquire(0)
    runtime.advance(10 * LEASE)
    assert not watch.lost and engine.session_id == first and term.is_valid()
    gaps = {round(later - earlier, 6) for earlier, later in zip([opened_at, *sent_at], sent_at)}
    assert gaps == {2.0}, gaps
    logged = [r.getMessage() for r in caplog.records if "LEASE_DURATION asks for" in r.getMessage()]
    assert len(logged) == 1, logged
    assert "a session of 6 s where LEASE_DURATION asks for 15 s" in logged[0]
    assert "every 2 s instead of every 5 s" in logged[0]
    engine.close()


def test_a_full_grant_keeps_the_renew_interval_and_logs_nothing(runtime, make_engine, caplog):
    caplog.set_level(logging.WARNING, logger="django_simba.engine")
    engine = make_engine(runtime)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    deadline = engine.session_deadline
    runtime.advance(RENEW + 0.01)
    assert engine.session_deadline == deadline + RENEW  # renewed once, a renew interval later
    assert "LEASE_DURATION asks for" not in caplog.text
