"""The flag a signal handler sets (simba_run's stop signals, the fault workers' SIGTERM), set in the
middle of the waits made on it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django_simba.testing import wait_until

ROOT = Path(__file__).resolve().parents[2]

#: A loop reduced to its waits, SIGTERM setting the flag as simba_run's handlers do.
WAITING = """
import signal, sys
from pathlib import Path
from django_simba.operations.wakeup import Wakeup

stop = Wakeup()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
progress = Path(sys.argv[1])
waits = 0
while True:
    stop.wait(0.0005)
    waits += 1
    if waits % 500 == 0:
        progress.write_text(str(waits))
"""


def test_the_flag_survives_sigterms_arriving_in_the_middle_of_its_waits(tmp_path: Path) -> None:
    # With a threading.Event, a handler that ran while the main thread held the Event's lock in
    # wait() waited for that lock forever: the worker hung within a second of such signals.
    progress = tmp_path / "progress"
    child = subprocess.Popen([sys.executable, "-c", WAITING, str(progress)], cwd=ROOT)
    try:
        wait_until(progress.exists, 30, message="the child waiting")
        storm_ends = time.monotonic() + 2
        while time.monotonic() < storm_ends:
            os.kill(child.pid, signal.SIGTERM)
            time.sleep(0.0002)
        after_storm = int(progress.read_text() or 0)
        wait_until(lambda: int(progress.read_text() or 0) > after_storm, 10, message="waits after the storm")
        assert child.poll() is None
    finally:
        child.kill()
        child.wait(10)
