"""The deterministic simulation (docs/proof.rst): seeds keep every invariant; the premises break them.

``SIMBA_SIM_SEEDS`` sets how many seeds the sweep runs (default 2000), ``SIMBA_SIM_JOBS``
how many worker processes run them (default 1: the sweep runs beside the rest of the suite,
started by ``conftest.py`` once the tests are collected).
"""

from __future__ import annotations

import pytest

from django_simba.testing.simulation import Premise, SimulationConfig
from django_simba.testing.simulation.batch import Summary, run_seeds
from django_simba.testing.simulation.cli import format_summary
from django_simba.testing.simulation.faults import FaultKind
from django_simba.testing.simulation.invariants import (
    DUPLICATE_TERM,
    STALE_WRITE,
    SUPERSEDED_LEADER,
    TOKEN_NOT_INCREASING,
    TWO_LEADERS,
)
from django_simba.testing.simulation.network import (
    ANSWERED_LATE,
    APPLIED_LATE,
    CALL_EFFECTS,
    LOST_REPLY,
    LOST_REQUEST,
    REFUSED,
    RESET_AFTER,
    RESET_BEFORE,
    SLOW_REPLY,
)

from .sweep import JOBS, KNOWN_ENGINE_ISSUES, SEEDS

PREMISE_SEEDS = 60

#: Every backend operation the workload's engines call: every kind of network fault must hit each.
OPERATIONS = (
    "open_session",
    "keep_alive",
    "close_session",
    "acquire",
    "release",
    "stop_waiting",
    "join",
    "leave",
    "purge_expired",
    "watch_lease",
    "unwatch_lease",
)
FAULT_KINDS = {
    "lost": {LOST_REQUEST, LOST_REPLY},
    "reset": {RESET_BEFORE, RESET_AFTER},
    "late": {APPLIED_LATE, ANSWERED_LATE, SLOW_REPLY},
    "refused": {REFUSED},
}
#: ... and every single fault the operations that decide who holds a name.
EVERY_FAULT = ("acquire", "release", "keep_alive")


def explain(summary: Summary, config: SimulationConfig) -> str:
    return "\n\n".join([format_summary(summary, config, jobs=JOBS), *summary.reports])


@pytest.mark.slow
def test_no_seed_breaks_an_invariant_beyond_the_known_engine_issues(sweep: Summary):
    assert sweep.seeds == SEEDS
    first = sweep.first_violation
    unexplained = {seed: kind for seed, kind in first.items() if kind not in KNOWN_ENGINE_ISSUES}
    assert not unexplained, explain(sweep, SimulationConfig(seed=0))


@pytest.mark.slow
def test_the_sweep_injects_every_fault_and_measures_take_overs(sweep: Summary):
    if SEEDS < 1000:
        pytest.skip("too few seeds to expect every kind of fault")
    config = SimulationConfig(seed=0)
    premise_kinds = {FaultKind.TOKEN_RESET, FaultKind.CLOCK_STEP, FaultKind.SESSIONS_LOST}
    for kind in set(FaultKind) - premise_kinds:
        assert sweep.faults[f"episode: {kind.value}"] > 0, kind
    effects = (
        *CALL_EFFECTS,
        "pause longer than the lease",
        "crash",
        "drifting clock",
        "backend restart",
        "lost notification",
        "late write",
        "resign",
        "session evicted",
        "fork",
        "forked child exits",
        "forked child killed",
        "graceful restart",
        "data lost",
        "failover to a stale replica",
        "server grants a shorter session",
    )
    for effect in effects:
        assert sweep.faults[effect] > 0, effect
    for operation in OPERATIONS:
        hit = {effect for effect in CALL_EFFECTS if sweep.call_faults[(operation, effect)]}
        missing = {kind for kind, effects in FAULT_KINDS.items() if not hit & effects}
        assert not missing, (operation, missing)
    for operation in EVERY_FAULT:
        assert not set(CALL_EFFECTS) - {e for e in CALL_EFFECTS if sweep.call_faults[(operation, e)]}
    assert set(sweep.hand_overs) == {"never", "release", "always"}
    assert not any(k.value in sweep.faults for k in premise_kinds)
    assert sweep.takeovers_checked >= SEEDS // 10
    assert sweep.worst_checked_takeover.seconds <= config.takeover_bound
    assert sweep.recoveries >= SEEDS // 10
    assert sweep.writes_rejected > 0  # stale leaders did write, and fencing refused them


# -- premises: what no client can prevent -------------------------------------------------------

PREMISES = [
    # the backend forgot its tokens: they go down, a token is handed out twice, and fencing lets a
    # superseded writer through
    (Premise.TOKEN_RESET, {TOKEN_NOT_INCREASING, DUPLICATE_TERM, STALE_WRITE}),
    # live sessions expire at once on the backend while their holders still trust their deadlines
    (Premise.CLOCK_STEP, {TWO_LEADERS, SUPERSEDED_LEADER}),
    (Premise.SESSIONS_LOST, {TWO_LEADERS, SUPERSEDED_LEADER}),
    # a clock slower than DRIFT allows trusts a term past its expiry on the backend
    (Premise.DRIFT_EXCEEDED, {TWO_LEADERS, SUPERSEDED_LEADER}),
    # an evicted session's keep-alive frees its leases at once, while its holder trusts them
    (Premise.EVICTION_FREES_LEASES, {TWO_LEADERS, SUPERSEDED_LEADER}),
]


@pytest.mark.slow  # 60 seeds each: with the sweep in the full tier (the fast tier has its short sweep)
@pytest.mark.parametrize(("premise", "expected"), PREMISES, ids=[p.value for p, _ in PREMISES])
def test_each_premise_breaks_the_invariants_it_must(premise: Premise, expected: set[str]):
    config = SimulationConfig(seed=0, premises=frozenset({premise}))
    summary = run_seeds(range(PREMISE_SEEDS), config)
    assert expected <= set(summary.violations), format_summary(summary, config)
    if premise is not Premise.TOKEN_RESET:
        # tokens survived: each is handed out once, and fencing still refuses every superseded writer
        assert not {STALE_WRITE, TOKEN_NOT_INCREASING, DUPLICATE_TERM} & set(summary.violations)


#: Premises that break who leads, with how many seeds show it (an eviction breaks a run in four).
BREAKING_PREMISES = [
    (Premise.CLOCK_STEP, 20),
    (Premise.SESSIONS_LOST, 20),
    (Premise.EVICTION_FREES_LEASES, 40),
]


@pytest.mark.slow
@pytest.mark.parametrize(("premise", "seeds"), BREAKING_PREMISES, ids=[p.value for p, _ in BREAKING_PREMISES])
def test_the_premise_is_what_breaks_them(premise: Premise, seeds: int):
    broken = run_seeds(range(seeds), SimulationConfig(seed=0, premises=frozenset({premise})))
    assert len(broken.failing_seeds) >= 5
    intact = run_seeds(broken.failing_seeds, SimulationConfig(seed=0))
    unexplained = {s: k for s, k in intact.first_violation.items() if k not in KNOWN_ENGINE_ISSUES}
    assert not unexplained, format_summary(intact, SimulationConfig(seed=0))
