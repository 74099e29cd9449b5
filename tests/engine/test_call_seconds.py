"""Spans of seconds a caller gives the engine: refused where given, with the accepted range.

``nan`` compares false with everything, so a plain ``value < 0`` let it through (a ``max_hold``
of nan ended the term at once, a ``timeout`` of nan never timed out); a value past what the
timers represent failed later, deep in a thread. Every one is refused with a ValueError (a
TypeError for what is no number) that says what is accepted. An infinity means no limit, as
``None`` does.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from typing import Any

import pytest

from django_simba.engine import AsyncLock, AsyncSemaphore, Engine, EngineConfig
from django_simba.engine.config import MAX_SECONDS, check_seconds
from django_simba.errors import ConfigurationError

RANGE = "up to 31536000 (365 days)"
BAD = [math.nan, -1, -math.inf, MAX_SECONDS + 1, 1e300]
BAD_IDS = ["nan", "negative", "-inf", "past a year", "1e300"]


#: Every place the engine takes seconds from a caller, as a call on an engine with that value.
PLACES: dict[str, Callable[[Engine, Any], object]] = {
    "lock timeout": lambda engine, value: engine.lock("seconds", timeout=value),
    "lock max_hold": lambda engine, value: engine.lock("seconds", max_hold=value),
    "acquire timeout": lambda engine, value: engine.lock("seconds").acquire(value),
    "semaphore timeout": lambda engine, value: engine.semaphore("seconds", 2, timeout=value),
    "semaphore max_hold": lambda engine, value: engine.semaphore("seconds", 2, max_hold=value),
    "semaphore acquire": lambda engine, value: engine.semaphore("seconds", 2).acquire(value),
    "alock acquire": lambda engine, value: asyncio.run(AsyncLock(engine, "seconds").acquire(value)),
    "alock max_hold": lambda engine, value: AsyncLock(engine, "seconds", max_hold=value),
    "asemaphore acquire": lambda engine, value: asyncio.run(
        AsyncSemaphore(engine, "seconds", 2).acquire(value)
    ),
    "election wait": lambda engine, value: engine.election("seconds").wait_decided(value),
    "group join": lambda engine, value: engine.group("seconds").join(value),
    "session wait": lambda engine, value: engine.wait_for_session(value),
    "engine close": lambda engine, value: engine.close(value),
}


@pytest.mark.parametrize("value", BAD, ids=BAD_IDS)
@pytest.mark.parametrize("place", PLACES)
def test_a_bad_span_of_seconds_is_refused_with_the_accepted_range(threaded_engine: Engine, place: str, value):
    with pytest.raises(ValueError, match=r"must be .*seconds .*up to 31536000 \(365 days\), not"):
        PLACES[place](threaded_engine, value)


@pytest.mark.parametrize("place", PLACES)
def test_what_is_no_number_is_a_type_error(threaded_engine: Engine, place: str):
    with pytest.raises(TypeError, match=re.escape(RANGE)):
        PLACES[place](threaded_engine, "5")


def test_a_maximum_hold_of_zero_is_refused(threaded_engine: Engine):
    with pytest.raises(ValueError, match="more than 0 and up to"):
        threaded_engine.lock("seconds", max_hold=0)


def test_an_infinity_means_no_limit_as_none_does(threaded_engine: Engine):
    lock = threaded_engine.lock("seconds", timeout=math.inf, max_hold=math.inf)
    assert lock.timeout is None and lock.max_hold is None
    term = lock.acquire(math.inf)
    assert term.is_valid()
    lock.release()
    assert threaded_engine.election("seconds.e").wait_decided(math.inf)
    assert check_seconds("timeout", MAX_SECONDS) == MAX_SECONDS


@pytest.mark.parametrize("field", ["lease_duration", "renew_interval", "purge_interval"])
@pytest.mark.parametrize("value", [math.nan, math.inf, MAX_SECONDS * 2, 0, -5], ids=str)
def test_the_engines_timings_are_refused_outside_the_range(field: str, value: float):
    timings: dict[str, float] = {"lease_duration": 15.0, "renew_interval": 5.0, "purge_interval": 60.0}
    timings[field] = value
    expected = f"{field} must be a number of seconds more than 0 and {RANGE}"
    with pytest.raises(ConfigurationError, match=re.escape(expected)):
        EngineConfig(**timings)  # type: ignore[arg-type]
