"""The production runtime's timers: they fire in order, and cancelled ones do not pile up."""

from __future__ import annotations

import threading
import time

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import Engine, EngineConfig, ThreadRuntime
from django_simba.engine.runtime import COMPACT_MIN
from django_simba.spi import clock
from django_simba.testing import wait_until


def test_timers_fire_in_due_order_even_when_added_later_and_earlier():
    runtime = ThreadRuntime()
    runtime.start()
    fired: list[str] = []
    try:
        runtime.call_later(0.3, lambda: fired.append("late"))
        runtime.call_later(0.05, lambda: fired.append("early"))  # must wake the sleeping timer thread
        runtime.call_later(0.2, lambda: fired.append("middle"))  # need not wake it
        wait_until(lambda: len(fired) == 3, 5, message="three timers")
        assert fired == ["early", "middle", "late"]
    finally:
        runtime.stop(5)


def test_cancelled_timers_are_dropped_from_the_heap():
    runtime = ThreadRuntime()
    runtime.start()
    try:
        keeper = threading.Event()
        runtime.call_later(0.2, keeper.set)
        for _ in range(20 * COMPACT_MIN):
            runtime.call_later(60, lambda: None).cancel()
        assert len(runtime._timers) <= 2 * COMPACT_MIN
        assert keeper.wait(5), "a live timer was dropped with the cancelled ones"
    finally:
        runtime.stop(5)


def test_a_lock_taken_and_released_in_a_loop_leaves_no_timers_behind():
    # A long lease: the loop runs for seconds, and a loaded machine may hold back a keep-alive
    # for longer than the threaded fixture's 2 s lease (the term then ends mid-loop).
    engine = Engine(
        MemoryBackend(timeout=5.0), EngineConfig(lease_duration=60.0, renew_interval=5.0), ThreadRuntime()
    )
    try:
        lock = engine.lock("runtime:loop")
        lock.acquire(5)
        lock.release()
        before = sum(not entry[2].cancelled for entry in engine.runtime._timers)
        for _ in range(3 * COMPACT_MIN):
            lock.acquire(5)
            lock.release()
        live = sum(not entry[2].cancelled for entry in engine.runtime._timers)
        assert live <= before + 1  # each term's deadline timer is cancelled when the term ends
        assert len(engine.runtime._timers) <= 2 * COMPACT_MIN + live
    finally:
        engine.close()


@pytest.mark.skipif(not hasattr(time, "CLOCK_BOOTTIME"), reason="CLOCK_BOOTTIME is Linux's")
def test_the_production_clock_counts_time_the_machine_spent_suspended(monkeypatch: pytest.MonkeyPatch):
    # CLOCK_MONOTONIC stops while a laptop or VM is suspended; the backend's clock does not.
    suspended = 3600.0
    readings = {time.CLOCK_MONOTONIC: 100.0, time.CLOCK_BOOTTIME: 100.0 + suspended}
    monkeypatch.setattr(time, "clock_gettime", lambda clock_id: readings[clock_id])
    monkeypatch.setattr(time, "monotonic", lambda: 100.0)
    picked, name = clock._pick()  # the clock is picked at import: pick again with the clocks faked
    assert picked() == 100.0 + suspended
    assert name == clock.LOCAL_CLOCK_NAME == "CLOCK_BOOTTIME"
    assert ThreadRuntime().now is clock.local_clock
