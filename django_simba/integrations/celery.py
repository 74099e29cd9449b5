"""Celery: the prefork main process holds nothing, and every pool process closes its session on exit.

The main process of ``celery worker`` loads Django, then forks the pool processes
that run the tasks (with the default prefork pool): it holds no session and its
candidacies go to the pool processes, until ``worker_init`` names a pool that runs
tasks in the main process itself (solo, threads, gevent, eventlet). A pool
process leaves through ``os._exit``, so exit handlers never run there: its session
is closed from ``worker_process_shutdown``. Celery is imported only where it
already is (this module is loaded when ``celery`` is in ``sys.modules``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

from .recognise import main_thread_codes, started_as

logger = logging.getLogger("django_simba")


def is_worker_main(argv: Sequence[str]) -> bool:
    """True in the main process of a Celery worker (not in one of its pool processes)."""
    if "celery" not in sys.modules:
        return False
    billiard = sys.modules.get("billiard.process")
    if billiard is not None and billiard.current_process().name != "MainProcess":
        return False  # a pool process (forked or spawned)
    if _is_worker_command(argv):
        return True
    worker = sys.modules.get("celery.worker.worker")
    return worker is not None and worker.WorkController.__init__.__code__ in main_thread_codes()


def _is_worker_command(argv: Sequence[str]) -> bool:
    return started_as(argv, "celery") and "worker" in argv[1:]


def connect() -> None:
    """Wire Celery's signals (idempotent)."""
    from celery import signals

    signals.worker_init.connect(_on_worker_init, weak=False, dispatch_uid="django_simba.worker_init")
    signals.worker_process_shutdown.connect(
        _on_worker_process_shutdown, weak=False, dispatch_uid="django_simba.worker_process_shutdown"
    )


def pool_forks(pool_cls: Any) -> bool:
    """Whether the pool runs tasks in processes forked from the main one."""
    from celery.concurrency import get_implementation
    from celery.concurrency.prefork import TaskPool

    pool = get_implementation(pool_cls) if isinstance(pool_cls, str) else pool_cls
    return isinstance(pool, type) and issubclass(pool, TaskPool)


def _on_worker_init(sender: Any = None, **kwargs: Any) -> None:
    pool_cls = getattr(sender, "pool_cls", None)
    if pool_cls is None or pool_forks(pool_cls):
        return
    from .serving import serve_here

    serve_here(f"Celery worker with the {getattr(pool_cls, '__module__', pool_cls)} pool")


def _on_worker_process_shutdown(**kwargs: Any) -> None:
    from .. import registry

    try:
        registry.reset()  # closes the session: the other processes take over at once
    except Exception:
        logger.exception("django-simba: closing the session of the pool process failed")
