"""Recognising an RQ worker: ``rq worker`` (and ``rqworker``), or django-rq's ``rqworker`` command.

Each job runs in a work horse forked from the worker: it inherits the worker's
decision. Nothing here imports RQ.
"""

from __future__ import annotations

from collections.abc import Sequence

from .recognise import management_command, started_as

#: django-rq's commands that run workers.
WORKER_COMMANDS = frozenset({"rqworker", "rqworker-pool"})


def is_worker(argv: Sequence[str]) -> bool:
    if started_as(argv, "rqworker") or (started_as(argv, "rq") and {"worker", "worker-pool"} & set(argv[1:])):
        return True
    return management_command(argv) in WORKER_COMMANDS
