"""The 2,000-seed sweep starts in a process of its own as soon as the tests are collected.

It needs one core for a minute or two while the rest of the suite mostly waits on servers and
timers, so the suite does not wait for it at the end. The ``sweep`` fixture collects it.

One sweep per run: under pytest-xdist every worker collects the sweep's tests, and the first
to claim the run's sweep directory starts it; the worker that runs a test of the sweep reads
its result from that directory, whichever worker started it. The run's own process (the
xdist controller, or the only process) stops a sweep still running when the run ends.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

from django_simba.testing.simulation.batch import Summary
from tests.conftest import PROCESS_GROUP_FILE, run_directory

from . import sweep as sweep_process
from .sweep import SEEDS

#: The sweep takes a minute or two of one core; this is only where a hung run is given up.
SWEEP_DEADLINE = 900.0
ROOT = Path(__file__).resolve().parents[2]
#: Kept for the run (a worker may end before the sweep: it is not waited for there).
_STARTED = pytest.StashKey[subprocess.Popen[bytes]]()


def _directory() -> Path:
    return run_directory() / "sweep"


def pytest_collection_finish(session: pytest.Session) -> None:
    if not any("sweep" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    directory = _directory()
    try:
        directory.mkdir()  # atomic: one process of the run wins
    except FileExistsError:
        return
    with (directory / sweep_process.STDERR).open("wb") as errors:
        session.config.stash[_STARTED] = subprocess.Popen(
            [sys.executable, "-m", "tests.simulation.sweep", str(directory)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            start_new_session=True,  # a group of its own, stopped whole if the run ends first
        )


def _died(directory: Path) -> bool:
    """Its process group was written (it started) and is gone, yet it wrote no status."""
    try:
        os.killpg(int((directory / PROCESS_GROUP_FILE).read_text()), 0)
    except (OSError, ValueError) as error:
        return isinstance(error, ProcessLookupError) and not (directory / sweep_process.STATUS).exists()
    return False


@pytest.fixture(scope="module")
def sweep() -> Summary:
    directory = _directory()
    status_file = directory / sweep_process.STATUS
    deadline = time.monotonic() + SWEEP_DEADLINE
    while not status_file.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the {SEEDS}-seed sweep did not finish within {SWEEP_DEADLINE:g} s")
        if _died(directory):
            detail = (directory / sweep_process.STDERR).read_text(errors="replace")
            pytest.fail(f"the sweep's process died before it finished:\n{detail}")
        time.sleep(0.2)
    status = int(status_file.read_text())
    summary_file = directory / sweep_process.SUMMARY
    # Exit status 1 means an invariant was broken: the summary says which, and the test reports it.
    if status not in (0, 1) or not summary_file.exists():
        detail = (directory / sweep_process.STDERR).read_text(errors="replace")
        pytest.fail(f"the sweep failed (exit status {status}):\n{detail}")
    with summary_file.open("rb") as file:
        summary = pickle.load(file)
    assert isinstance(summary, Summary)
    return summary
