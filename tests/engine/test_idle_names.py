"""Names nobody here uses any more leave no state behind (issue 28.4): a process that locks a
name per object keeps a slot only for the names it holds, waits for, or used within a lease."""

from __future__ import annotations

from django_simba.engine.lock import Request
from django_simba.spi import Renewal

from .conftest import LEASE, RENEW, FaultyRuntime


def _started(make_engine, runtime):
    engine = make_engine(runtime)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    return engine


def test_released_names_are_forgotten_at_the_next_keep_alive(runtime, make_engine):
    engine = _started(make_engine, runtime)
    for number in range(200):
        with engine.lock(f"invoice:{number}"):
            pass
    held = engine.lock("held")
    held.acquire(0)
    assert len(engine.lines.slots) == 201
    runtime.advance(RENEW + 0.1)  # one keep-alive
    assert list(engine.lines.slots) == ["held"]
    assert held.locked()  # what is held stays, and is renewed
    runtime.advance(LEASE + RENEW)
    assert held.locked() and list(engine.lines.slots) == ["held"]
    assert engine.lines._retired == {}  # the gate's floors too, once a lease has passed


def test_a_name_used_again_after_it_was_forgotten_gets_a_higher_token(runtime, make_engine):
    engine = _started(make_engine, runtime)
    with engine.lock("again") as first:
        pass
    runtime.advance(RENEW + 0.1)
    assert "again" not in engine.lines.slots
    with engine.lock("again") as second:
        assert second.token > first.token
    runtime.advance(2 * LEASE)
    assert "again" not in engine.lines.slots and not engine.lines._retired
    with engine.lock("again") as third:
        assert third.token > second.token


def test_the_gate_still_refuses_an_older_term_of_a_forgotten_name(runtime, make_engine):
    engine = _started(make_engine, runtime)
    engine.backend.hands_over = True  # a listed term of ours then goes to a waiter here
    engine.backend._stop_waiting = lambda session_id, name: None
    with engine.lock("late") as term:
        pass
    runtime.advance(RENEW + 0.1)
    assert "late" not in engine.lines.slots
    request = Request(engine.lock("late"), waits=True)
    session = engine.session_id
    assert session is not None
    with engine.mutex:
        engine.lines.slot("late").waiting.append(request)
        # A keep-alive reply sent before that release, arriving now, lists the old term.
        listing = Renewal(LEASE, {"late": term.token})
        engine.lines.reconcile(session, runtime.now() - RENEW, listing, runtime.now() + LEASE)
    assert request.term is None  # the floor outlived the slot: the old term is not granted again


def test_a_name_someone_waits_for_keeps_its_slot(make_engine):
    runtime = FaultyRuntime(seed=3, timeout=RENEW)
    holder = _started(make_engine, runtime)
    other_runtime = FaultyRuntime(seed=4, timeout=RENEW)
    waiter = _started(make_engine, other_runtime)
    holder.lock("busy").acquire(0)
    blocked = waiter.lock("busy")
    assert blocked.try_acquire() is None
    other_runtime.advance(RENEW + 0.1)
    # refused within the last renew interval: the name is contended, its pacing state is kept
    assert "busy" in waiter.lines.slots
