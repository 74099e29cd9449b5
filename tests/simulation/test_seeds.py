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
    # released meanwhile gives it to the other candidate, with the released term's token.
    pytest.param(300, id="300-stale-listing-regranted"),
    pytest.param(813, id="813-stale-listing-regranted"),
    # A stop_waiting answered while an acquire is still queued clears the slot's busy mark: a second
    # acquire goes out, and its late reply, the term held now, is freed as if it were an old one.
    pytest.param(5286, id="5286-held-term-freed-by-a-duplicate-acquire"),
    # A leave applied after its timeout undoes the join made after it: the session is no member.
    pytest.param(3770, id="3770-late-leave-undoes-a-join"),
]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_seed_breaks_no_invariant(seed: int):
    result = simulate(SimulationConfig(seed=seed))
    assert result.ok, result.report()
