"""``TINYSITE_ELECTION`` names an election started in ``ready()``; ``TINYSITE_HANDLES`` imports handles
made at module level (as docs/semaphores.rst shows). ``TINYSITE_LINGER`` names a file: when the command
is done, the process says what its election did and waits for that file before it exits, so that a
test can look at the backend while the process still lives (its session, if it had one, still open)."""

import atexit
import os
import time
from pathlib import Path

from django.apps import AppConfig

#: How long a lingering process waits for the test at most.
LINGER = 60.0


class SchedulerConfig(AppConfig):
    name = "tests.django.tinysite.scheduler"
    label = "tinysite_scheduler"
    election = None

    def ready(self) -> None:
        if os.environ.get("TINYSITE_HANDLES"):
            from . import handles  # noqa: F401
        name = os.environ.get("TINYSITE_ELECTION")
        if name:
            from django_simba import election

            self.election = election(name)
        release = os.environ.get("TINYSITE_LINGER")
        if release:
            # Registered after the engine's own exit hook: it runs first, before anything is closed.
            atexit.register(self.linger, Path(release))

    def linger(self, release: Path) -> None:
        held = self.election is not None and self.election.held
        leads = self.election is not None and self.election.is_leader
        print(f"TINYSITE LINGERS pid={os.getpid()} held={held} leads={leads}", flush=True)
        deadline = time.monotonic() + LINGER
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
