"""The async API's waits refuse a bad span of seconds where it is given (issue 22.8, call side)."""

from __future__ import annotations

import asyncio
import math

import pytest

from django_simba import aelection, agroup, alock, asemaphore
from tests.django.engines import fresh_engine_on

SIMBA = {"BACKEND": "memory", "LEASE_DURATION": 3, "RENEW_INTERVAL": 1, "METADATA": "async-seconds"}
RANGE = r"seconds from 0 up to 31536000 \(365 days\), not"

WAITS = {
    "alock": lambda value: alock("seconds", value).acquire(),
    "asemaphore": lambda value: asemaphore("seconds", 2, value).acquire(),
    "wait_elected": lambda value: aelection("seconds").wait_elected(value),
    "wait_decided": lambda value: aelection("seconds").wait_decided(value),
    "group join": lambda value: agroup("seconds").join(value),
}


fresh_engine = fresh_engine_on(SIMBA)


@pytest.mark.parametrize("value", [math.nan, -1.0, 1e300], ids=["nan", "negative", "1e300"])
@pytest.mark.parametrize("wait", list(WAITS))
def test_an_async_wait_refuses_a_bad_span_of_seconds(wait: str, value: float):
    async def main() -> None:
        await WAITS[wait](value)

    with pytest.raises(ValueError, match=RANGE):
        asyncio.run(main())
