"""A worker process for test_singleton_task: runs a ``singleton_task(permits=...)`` a few times.

``python -m tests.django.permit_worker STATE ROUNDS NAME PERMITS``: every call notes, in the
JSON file STATE (under an exclusive ``flock`` of STATE.lock), how many calls hold a permit at
once and which permit and token it ran under.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def shared_state(path: Path) -> Iterator[dict[str, Any]]:
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = json.loads(path.read_text()) if path.exists() else {"holding": 0, "peak": 0, "entries": []}
        yield state
        path.write_text(json.dumps(state))


def main(path: Path, rounds: int, name: str, permits: int) -> None:
    import django

    django.setup()
    from django_simba import registry, singleton_task
    from django_simba.decorators import Skipped, current_term

    @singleton_task(name, permits=permits, timeout=60)
    def export() -> None:
        term = current_term()
        assert term is not None
        with shared_state(path) as state:
            state["holding"] += 1
            state["peak"] = max(state["peak"], state["holding"])
            state["entries"].append([term.name, term.token])
        # The work under the permit: it lasts until every permit is taken (or 2 s passed), so
        # that the peak shows the permits were all usable at once, whatever the machine's load.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            with shared_state(path) as state:
                if state["holding"] >= permits:
                    break
            time.sleep(0.01)
        with shared_state(path) as state:
            state["holding"] -= 1

    for _ in range(rounds):
        if isinstance(export(), Skipped):
            raise SystemExit("skipped although it waits 60 s for a permit")
    registry.reset()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
