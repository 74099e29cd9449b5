"""The watchdog that bounds every database call: it interrupts only calls still running."""

from __future__ import annotations

import threading

from django_simba.backends.database.watchdog import Watchdog


def test_a_call_past_its_deadline_is_interrupted() -> None:
    watchdog = Watchdog()
    interrupted = threading.Event()
    try:
        with watchdog.guard(0.05, interrupted.set) as alarm:
            assert interrupted.wait(5)
        assert alarm.fired
    finally:
        watchdog.stop()


def test_a_call_that_ended_in_time_is_never_interrupted() -> None:
    watchdog = Watchdog()
    early = threading.Event()
    later = threading.Event()
    try:
        with watchdog.guard(0.05, early.set) as finished:
            pass
        # Alarms fire in deadline order: once the later one fired, the earlier one had its turn.
        with watchdog.guard(0.1, later.set):
            assert later.wait(5)
        assert not early.is_set() and not finished.fired
    finally:
        watchdog.stop()


def test_a_stopped_watchdog_starts_again_with_the_next_call() -> None:
    watchdog = Watchdog()
    with watchdog.guard(60, lambda: None):
        pass
    watchdog.stop()
    interrupted = threading.Event()
    try:
        with watchdog.guard(0.05, interrupted.set):
            assert interrupted.wait(5)
    finally:
        watchdog.stop()
