"""The timing policy of retries (engine/pacing.py): exact figures, so a changed constant is seen.

The mutation campaign (docs/mutation.rst) found that the engine's scenario tests pass with most of
these figures changed: a poll a little sooner or later, a courtesy pause a little longer, still
ends in the same grants. These tests pin the policy itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from django_simba.engine import EngineConfig
from django_simba.engine.pacing import COURTESY_CAP, NOTIFIED_COURTESY, POLLED_COURTESY, Pacing
from django_simba.engine.slot import FIRST_POLL_DELAY, Slot
from django_simba.testing.runtime import VirtualRuntime

RENEW = 4.0
NOW = 1000.0


@dataclass
class FakeBackend:
    """The two capabilities the policy reads."""

    notifying: bool = False
    hands_over: bool = False


def make_pacing(*, notifying: bool = False, hands_over: bool = False) -> Pacing:
    config = EngineConfig(lease_duration=3 * RENEW, renew_interval=RENEW)
    backend = FakeBackend(notifying=notifying, hands_over=hands_over)
    return Pacing(backend, config, VirtualRuntime(seed=7))  # type: ignore[arg-type]


def wanted_slot(wanted_ago: float = 0.0) -> Slot:
    return Slot("name", wanted_at=NOW - wanted_ago)


def courtesy(pacing: Pacing, slot: Slot) -> float:
    pacing.offer_to_others(slot, NOW)
    return slot.courtesy_until - NOW


def test_a_name_stays_contended_for_exactly_one_renew_interval() -> None:
    pacing = make_pacing()
    assert pacing.contended(wanted_slot(RENEW / 2), NOW)
    assert pacing.contended(wanted_slot(RENEW), NOW)  # the bound itself is still contended
    assert not pacing.contended(wanted_slot(RENEW + 0.001), NOW)
    assert not pacing.contended(Slot("never-wanted"), NOW)


def test_without_a_measured_round_trip_the_courtesy_is_the_margin_alone() -> None:
    assert courtesy(make_pacing(), wanted_slot()) == pytest.approx(POLLED_COURTESY[1])
    assert courtesy(make_pacing(notifying=True), wanted_slot()) == pytest.approx(NOTIFIED_COURTESY[1])


def test_the_courtesy_counts_round_trips_of_the_moving_average() -> None:
    polled, notified = make_pacing(), make_pacing(notifying=True)
    for pacing in (polled, notified):
        pacing.measure_acquire(0.010)
        pacing.measure_acquire(0.020)  # average: 0.8 * 0.010 + 0.2 * 0.020 = 0.012
    assert courtesy(polled, wanted_slot()) == pytest.approx(3 * 0.012 + 0.001)
    assert courtesy(notified, wanted_slot()) == pytest.approx(2 * 0.012 + 0.0003)
    assert (POLLED_COURTESY, NOTIFIED_COURTESY) == ((3, 0.001), (2, 0.0003))


def test_the_courtesy_is_capped_at_a_tenth_of_the_renew_interval() -> None:
    pacing = make_pacing()
    pacing.measure_acquire(10.0)
    assert courtesy(pacing, wanted_slot()) == pytest.approx(COURTESY_CAP * RENEW)
    assert COURTESY_CAP == 0.1


def test_no_courtesy_for_an_unwanted_name_a_local_waiter_or_a_backend_that_hands_over() -> None:
    assert courtesy(make_pacing(), Slot("unwanted")) == -NOW  # courtesy_until left at 0
    assert courtesy(make_pacing(hands_over=True), wanted_slot()) == -NOW
    slot = wanted_slot()
    slot.waiting.append(object())  # type: ignore[arg-type]
    assert courtesy(make_pacing(), slot) == -NOW


def test_a_refused_notified_attempt_waits_half_to_three_quarters_of_a_renew_interval() -> None:
    pacing = make_pacing(notifying=True)
    slot = Slot("name")
    delays = [pacing.retry_delay(slot) for _ in range(400)]
    assert min(delays) >= RENEW / 2
    assert max(delays) <= RENEW * 3 / 4
    assert min(delays) < RENEW / 2 + 0.05  # the jitter starts at nothing ...
    assert max(delays) > RENEW * 3 / 4 - 0.05  # ... and reaches a quarter interval
    assert slot.backoff == FIRST_POLL_DELAY  # the polling backoff is not touched


def test_a_refused_polled_attempt_backs_off() -> None:
    pacing = make_pacing()
    slot = Slot("name")
    delay = pacing.retry_delay(slot)
    assert FIRST_POLL_DELAY / 2 <= delay <= FIRST_POLL_DELAY
    assert slot.backoff == 2 * FIRST_POLL_DELAY


def test_the_poll_backoff_doubles_up_to_half_a_renew_interval_with_jitter_of_half() -> None:
    pacing = make_pacing()
    slot = Slot("name")
    seen = []
    for _ in range(20):
        before = slot.backoff
        delay = pacing.poll_delay(slot)
        assert before / 2 <= delay <= before
        seen.append(delay / before)
        assert slot.backoff == min(before * 2, RENEW / 2)
    assert slot.backoff == RENEW / 2
    assert min(seen) < 0.6
    assert max(seen) > 0.9
