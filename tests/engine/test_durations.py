"""Durations in messages are rounded to what matters: ``within 4.99976 s`` and ``after 0.0 s`` were seen."""

from __future__ import annotations

import pytest

from django_simba.engine import Engine
from django_simba.spi import LockTimeout, format_duration


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.0, "0 ms"),
        (0.0004, "<1 ms"),
        (0.0123, "12 ms"),
        (0.99949, "999 ms"),
        (4.99976, "5.0 s"),
        (9.94, "9.9 s"),
        (16.4, "16 s"),
        (119.4, "119 s"),
        (185.2, "3 min 05 s"),
        (None, "no limit"),
        (float("inf"), "no limit"),
    ],
)
def test_durations_read_as_people_say_them(seconds, shown):
    assert format_duration(seconds) == shown


def test_a_lock_timeout_says_its_wait_rounded(threaded_engine: Engine):
    held = threaded_engine.backend.open_session(30, "other").session_id
    threaded_engine.backend.acquire(held, "rounded")
    with pytest.raises(LockTimeout, match=r"not acquired within 50 ms"):
        threaded_engine.lock("rounded").acquire(0.04999)
