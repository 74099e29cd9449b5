"""A short sweep for the fast tier, of seeds that the full tier's sweep does not run."""

from __future__ import annotations

from django_simba.testing.simulation import SimulationConfig
from django_simba.testing.simulation.batch import run_seeds
from django_simba.testing.simulation.cli import format_summary

from .sweep import KNOWN_ENGINE_ISSUES, SEEDS

#: The seeds just after the full sweep's (a few seconds of one core).
SHORT_SWEEP = range(SEEDS, SEEDS + 150)


def test_a_short_sweep_of_other_seeds_breaks_no_invariant():
    config = SimulationConfig(seed=0)
    summary = run_seeds(SHORT_SWEEP, config)
    assert summary.seeds == len(SHORT_SWEEP)
    unexplained = {s: kind for s, kind in summary.first_violation.items() if kind not in KNOWN_ENGINE_ISSUES}
    assert not unexplained, "\n\n".join([format_summary(summary, config), *summary.reports])
