"""The fleet tells a clean exit from a crash and a hang (stand-in processes, no server needed)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from django_simba.testing import wait_until
from tests.faults.fleet import WorkerProcess


def stand_in(
    tmp_path: Path, code: str, events: list[dict[str, object]], stop_timeout: float = 1.0
) -> WorkerProcess:
    """A process that plays a worker: ``code`` runs, ``events`` are its log."""
    worker = WorkerProcess("w1", tmp_path / "w1.json", tmp_path / "w1.jsonl", tmp_path / "w1.err")
    worker.log_path.write_text("".join(json.dumps({"t": 0.0, "w": "w1", **e}) + "\n" for e in events))
    worker.stop_timeout = stop_timeout
    stderr = worker.stderr_path.open("wb")
    worker.process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], stdout=stderr, stderr=subprocess.STDOUT
    )
    stderr.close()
    return worker


READY = "import faulthandler, signal, sys, time\nfaulthandler.register(signal.SIGUSR1, all_threads=True)\n"


def test_a_clean_stop_has_no_problems(tmp_path: Path) -> None:
    code = (
        READY
        + "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\nprint('up', flush=True)\ntime.sleep(30)"
    )
    # As long as it takes: a loaded machine took over the 1 s that a hang is given below to exit.
    worker = stand_in(tmp_path, code, [{"e": "stopped"}], stop_timeout=30.0)
    wait_until(lambda: "up" in worker.stderr(), 10, message="the stand-in's handler in place")
    worker.stop()
    assert worker.problems() == []


def test_a_worker_that_ignores_sigterm_is_a_hang_with_its_stacks(tmp_path: Path) -> None:
    code = READY + "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up', flush=True)\ntime.sleep(30)"
    worker = stand_in(tmp_path, code, [{"e": "stopped"}])
    wait_until(lambda: "up" in worker.stderr(), 10, message="the stand-in ignoring SIGTERM")
    worker.stop()
    problems = worker.problems()
    assert worker.hung
    assert any("hung" in p for p in problems), problems
    assert any("stacks were dumped" in p for p in problems), problems


def test_a_traceback_or_a_crash_event_is_a_crash(tmp_path: Path) -> None:
    worker = stand_in(tmp_path, "raise SystemExit('boom')", [{"e": "crash", "error": "boom"}])
    worker.process.wait(10)  # type: ignore[union-attr]
    worker.stop()
    problems = worker.problems()
    assert any("exited with 1" in p for p in problems), problems
    assert any("crashed" in p for p in problems), problems
    assert any("never logged a clean stop" in p for p in problems), problems
