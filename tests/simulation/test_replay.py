"""A seed is a run: it replays identically, in this process or another, from one command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django_simba.testing.simulation import Premise, SimulationConfig, simulate
from django_simba.testing.simulation.cli import main
from django_simba.testing.simulation.result import REPORTED_VIOLATIONS

ROOT = Path(__file__).resolve().parents[2]


def fingerprint(seed: int, **options: object) -> tuple[object, ...]:
    result = simulate(SimulationConfig(seed=seed, **options))  # type: ignore[arg-type]
    return (result.events, sorted(result.faults.items()), result.takeovers, result.violations, result.trace)


def run_cli(*args: str, hash_seed: str = "0") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    return subprocess.run(
        [sys.executable, "-m", "django_simba.testing.simulation", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_seed_replays_identically():
    assert fingerprint(11) == fingerprint(11)
    assert fingerprint(11) != fingerprint(12)


def test_a_failing_seed_prints_its_trace_and_the_command_that_replays_it():
    premises = frozenset({Premise.CLOCK_STEP})
    runs = (simulate(SimulationConfig(seed=seed, premises=premises)) for seed in range(20))
    failing = next(run for run in runs if not run.ok)
    report = failing.report()
    seed = failing.config.seed
    command = f"python -m django_simba.testing.simulation --seed {seed} --trace --premise clock-step"
    assert command in report
    assert len(failing.trace) == failing.config.trace_size
    assert "VIOLATION" in failing.trace[-1]
    # the command, in another interpreter with another string hashing, finds the same violations
    replay = run_cli(*command.split()[3:], hash_seed="12345")
    assert replay.returncode == 1, replay.stderr
    for violation in failing.violations[:REPORTED_VIOLATIONS]:
        assert str(violation) in replay.stdout


def test_the_cli_runs_seeds_and_prints_a_summary(capsys):
    status = main(["--seeds", "3", "--first", "5"])
    out = capsys.readouterr().out
    assert "seeds run: 3" in out
    assert "faults injected" in out and "faults by backend operation" in out and "invariant violations" in out
    assert "take-overs after a leader crashed" in out and "runs by how the backend ends a term" in out
    assert status == (0 if "seeds with violations: none" in out else 1)


def test_the_cli_replays_one_seed_with_its_trace(capsys):
    assert main(["--seed", "5", "--trace"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("seed 5: no violation")
    assert "REGISTER" in out and "ORACLE" in out


def test_the_cli_exits_1_when_a_premise_breaks_an_invariant(capsys):
    assert main(["--seeds", "4", "--premise", "token-reset"]) == 1
    out = capsys.readouterr().out
    assert "a token that did not increase" in out and "replay: python -m" in out
