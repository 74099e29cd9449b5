"""Seeds that found engine issues, kept as runs that must break nothing.

Each failed on the engine the simulation was widened against. A seed replays exactly, but
any change of the engine's timing replays it differently: the scripted scenarios of
``test_engine_findings.py`` are what guards each issue for good.
"""

from __future__ import annotations

import pytest

from django_simba.testing.simulation import SimulationConfig, simulate

SEEDS = [
    # Two local candidates, a backend that hands names over: a keep-alive reply listing a term
    # released meanwhile (it was slow) gives it to the other candidate, with the released token,
    # while the backend gave the name to another session.
    pytest.param(264, id="264-stale-listing-regranted"),
    pytest.param(813, id="813-stale-listing-regranted"),
    # The same through a failed release: it failed unapplied while the backend restarted, the other
    # candidate's attempts failed too, and the first keep-alive after the restart listed the term.
    pytest.param(587, id="587-failed-release-regranted"),
    # A leave applied after its timeout undoes the join made after it: the session is no member.
    pytest.param(213, id="213-late-leave-undoes-a-join"),
    # The backend lost its data (a Redis restart without persistence, seed 3) or failed over to a
    # replica that missed the last writes (4, 224): without the scripts' rules tokens go back, two
    # processes lead at once and a superseded write is accepted (4); without only the rule that a
    # term granted before the loss is over, seed 224 breaks them (tests/simulation/test_forgetful.py;
    # 51 did until one-shot tries stopped leaving attempts behind, which changed its run).
    pytest.param(3, id="3-data-lost"),
    pytest.param(4, id="4-stale-failover-superseded-write"),
    pytest.param(224, id="224-term-before-the-loss-lives-on"),
    # A backend granting sessions shorter than the renew interval (ZooKeeper's maxSessionTimeout):
    # keep-alives on the configured interval lost every session at its deadline, over and over.
    pytest.param(30, id="30-short-grant-loss-loop"),
    # Shared handles (issue 22): with one holder per lock object, a caller's release freed the term
    # of the caller granted after its own term ended (0, 28, 53); with a mutex held across the block,
    # a caller met it (0, 28, 53: threads of one process, and a forked child's copy); with holdings
    # not per process, a forked child's thread was refused for its parent's holding (222, once
    # the other slices' faults joined the model; 28 and 53 did before).
    pytest.param(0, id="0-shared-handle-release-and-mutex"),
    pytest.param(28, id="28-shared-handle-fork-starts-over"),
    pytest.param(53, id="53-shared-handle-fork-starts-over"),
    pytest.param(222, id="222-shared-handle-fork-while-held"),
    # A failover to a replica that missed a join: the session lives on, its membership does not,
    # and only the resync that comes with the failover makes the engine join again.
    pytest.param(1614, id="1614-stale-failover-loses-a-membership"),
    pytest.param(2010, id="2010-stale-failover-loses-a-membership"),
]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_seed_breaks_no_invariant(seed: int):
    result = simulate(SimulationConfig(seed=seed))
    assert result.ok, result.report()
