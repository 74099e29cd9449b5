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
]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_seed_breaks_no_invariant(seed: int):
    result = simulate(SimulationConfig(seed=seed))
    assert result.ok, result.report()
