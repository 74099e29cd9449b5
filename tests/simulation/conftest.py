"""The 2,000-seed sweep starts in a process of its own as soon as the tests are collected.

It needs one core for a few minutes while the rest of the suite mostly waits on servers and
timers, so the suite does not wait for it at the end. The ``sweep`` fixture collects it.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from django_simba.testing.simulation.batch import Summary

from .sweep import JOBS, SEEDS

#: The sweep takes about three minutes of one core; this is only where a hung run is given up.
SWEEP_DEADLINE = 900.0

_SWEEP = pytest.StashKey[tuple[subprocess.Popen[bytes], Path]]()


def pytest_collection_finish(session: pytest.Session) -> None:
    if not any("sweep" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    output = Path(tempfile.mkdtemp(prefix="simba-sweep-")) / "summary.pickle"
    process = subprocess.Popen(
        [
            sys.executable, "-m", "django_simba.testing.simulation",
            "--seeds", str(SEEDS), "--jobs", str(JOBS), "--save-summary", str(output),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    session.config.stash[_SWEEP] = (process, output)


def pytest_unconfigure(config: pytest.Config) -> None:
    started = config.stash.get(_SWEEP, None)
    if started is not None and started[0].poll() is None:
        started[0].kill()  # the run was interrupted
        started[0].wait()


@pytest.fixture(scope="module")
def sweep(request: pytest.FixtureRequest) -> Summary:
    process, output = request.config.stash[_SWEEP]
    try:
        _, stderr = process.communicate(timeout=SWEEP_DEADLINE)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"the {SEEDS}-seed sweep did not finish within {SWEEP_DEADLINE:g} s")
    # Exit status 1 means an invariant was broken: the summary says which, and the test reports it.
    if process.returncode not in (0, 1) or not output.exists():
        detail = stderr.decode(errors="replace")
        pytest.fail(f"the sweep failed (exit status {process.returncode}):\n{detail}")
    with output.open("rb") as file:
        summary = pickle.load(file)
    assert isinstance(summary, Summary)
    return summary
