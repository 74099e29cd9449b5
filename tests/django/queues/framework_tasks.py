"""Django tasks that the tests' ``db_worker`` processes run (made by django_simba.task_framework).

Each run of ``serial`` appends what it saw (pid, token, when it started and
finished, whether its term was still valid) to the file ``SIMBA_TASK_RUNS``.
"""

import json
import os
import time

from django_simba.decorators import current_term
from django_simba.task_framework import singleton_django_task

from . import PREFIX

RUNS = os.environ.get("SIMBA_TASK_RUNS", os.devnull)
#: How long a run works while holding the lock: long enough for runs on other workers to queue up.
WORK = 0.2


@singleton_django_task(f"{PREFIX}:serial", timeout=120)
def serial(n: int) -> dict[str, int]:
    term = current_term()
    assert term is not None
    started = time.monotonic()
    time.sleep(WORK)  # the work itself
    finished = time.monotonic()
    run = {"n": n, "pid": os.getpid(), "token": term.token, "started": started, "finished": finished}
    with open(RUNS, "a") as runs:
        runs.write(json.dumps({**run, "valid": term.is_valid()}) + "\n")
    return {"n": n, "token": term.token}


@singleton_django_task(f"{PREFIX}:busy")
def busy(n: int) -> int:
    return n
