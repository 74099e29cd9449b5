"""The Redis rules for a server that forgets, in the model (``simulation/forgetful.py``).

The scripted tests drive the model backend alone; the seeds show the whole simulation catching
each rule once it is taken away, while with the rules every one of them keeps every invariant
(``test_seeds.py``).
"""

from __future__ import annotations

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.testing.simulation import SimulationConfig, simulate
from django_simba.testing.simulation.forgetful import ForgetfulMemoryBackend
from django_simba.testing.simulation.invariants import (
    DUPLICATE_TERM,
    STALE_WRITE,
    SUPERSEDED_LEADER,
    TOKEN_NOT_INCREASING,
    TWO_LEADERS,
)
from tests.clocks import Clock


@pytest.fixture
def model(clock: Clock) -> ForgetfulMemoryBackend:
    backend = ForgetfulMemoryBackend(clock=clock, hand_over=True)
    backend.mark()
    return backend


def test_after_a_loss_new_terms_wait_a_lease_and_tokens_go_on_above(
    model: ForgetfulMemoryBackend, clock: Clock
) -> None:
    holder = model.open_session(15, "holder").session_id
    before = model.acquire(holder, "x")
    assert before is not None
    model.lose_everything()
    clock.now += 1
    contender = model.open_session(15, "contender").session_id
    assert model.acquire(contender, "x") is None  # the epoch begins: held back for 15 s
    clock.now += 14.9
    assert model.acquire(contender, "x") is None
    model.keep_alive(contender, 15)
    clock.now += 0.2
    grant = model.acquire(contender, "x")
    assert grant is not None and grant.token > before.token


def test_a_stale_failover_ends_the_terms_from_before_it(model: ForgetfulMemoryBackend, clock: Clock) -> None:
    old = model.open_session(15, "old").session_id
    assert model.acquire(old, "x") is not None
    model.stop_replica()  # the replica still shows old holding x
    model.release(old, "x")
    new = model.open_session(15, "new").session_id
    taken = model.acquire(new, "x")
    assert taken is not None
    assert model.fail_over()
    clock.now += 1
    assert model.acquire(old, "x") is None  # the revived term is over, and no new one yet
    assert model.keep_alive(old, 15).owned == {}
    for _ in range(3):
        clock.now += 5
        model.keep_alive(old, 15)
    regranted = model.acquire(old, "x")
    assert regranted is not None and regranted.token > taken.token


def test_a_release_during_the_hold_back_hands_nothing_over(model: ForgetfulMemoryBackend) -> None:
    holder = model.open_session(15, "holder").session_id
    waiter = model.open_session(15, "waiter").session_id
    assert model.acquire(holder, "x") is not None
    assert model.acquire(waiter, "x", wait=True) is None
    model.marker = None  # lost the marker only (an upgrade from a version without one)
    model.release(holder, "x")
    assert model.owner("x") is None and model.line("x") == [waiter]


def test_a_longer_lease_extends_the_hold_back(model: ForgetfulMemoryBackend, clock: Clock) -> None:
    model.lose_everything()
    short = model.open_session(5, "short").session_id
    assert model.acquire(short, "x") is None
    long = model.open_session(20, "long").session_id
    assert model.acquire(long, "x") is None
    for _ in range(19):
        clock.now += 1
        model.keep_alive(short, 5)
    assert model.acquire(short, "x") is None  # 19 s after it began, of 20
    clock.now += 1.1
    model.keep_alive(short, 5)
    assert model.acquire(short, "x") is not None


#: Seeds of test_seeds.py whose runs lose data, and what each breaks once the rules are gone.
BROKEN_WITHOUT_RULES = [
    (3, {TOKEN_NOT_INCREASING, SUPERSEDED_LEADER, DUPLICATE_TERM}),
    (4, {STALE_WRITE, TWO_LEADERS, TOKEN_NOT_INCREASING}),
    (224, {TWO_LEADERS, SUPERSEDED_LEADER, DUPLICATE_TERM}),  # also the one rule "_current" alone
]


@pytest.mark.parametrize(
    ("seed", "expected"),
    BROKEN_WITHOUT_RULES,
    ids=[str(s) for s, _ in BROKEN_WITHOUT_RULES],
)
def test_without_the_rules_the_seed_breaks_the_invariants(seed: int, expected: set[str]) -> None:
    result = simulate(SimulationConfig(seed=seed, redis_rules=False))
    assert expected <= {v.kind for v in result.violations}, result.report()


@pytest.mark.parametrize("rule", ["_held_back", "_current", "_next_token"])
def test_each_rule_taken_away_alone_is_caught_by_a_seed(rule: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ForgetfulMemoryBackend, rule, getattr(MemoryBackend, rule))
    broken = [seed for seed, _ in BROKEN_WITHOUT_RULES if not simulate(SimulationConfig(seed=seed)).ok]
    assert broken, f"no seed notices that {rule} was taken away"
