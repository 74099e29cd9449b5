"""Celery: the prefork main process holds nothing, pool processes and beat serve, and a pool process
closes its session on exit.

The main process of ``celery worker`` loads Django, then forks the pool processes
that run the tasks (with the default prefork pool): it holds no session and its
candidacies go to the pool processes, until ``worker_init`` names a pool that runs
tasks in the main process itself (solo, threads, gevent, eventlet). A pool
process leaves through ``os._exit``, so exit handlers never run there: its session
is closed from ``worker_process_shutdown``. ``celery beat`` serves (see
:mod:`django_simba.integrations.celery_beat` for one beat in a cluster). Celery is
imported only where it already is (the hooks are connected when ``celery`` is in
``sys.modules``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .recognise import main_thread_codes, started_as

logger = logging.getLogger("django_simba")


def runs_this_process(argv: Sequence[str]) -> bool:
    return started_as(argv, "celery")


def is_pool_process() -> bool:
    """A process of a Celery worker's pool (forked or spawned by billiard)."""
    billiard = sys.modules.get("billiard.process")
    if "celery" not in sys.modules or billiard is None:
        return False
    return bool(billiard.current_process().name != "MainProcess")


def is_worker_main(argv: Sequence[str]) -> bool:
    """True in the main process of a Celery worker (not in one of its pool processes)."""
    if "celery" not in sys.modules or is_pool_process():
        return False
    if _is_worker_command(argv):
        return True
    worker = sys.modules.get("celery.worker.worker")
    return worker is not None and worker.WorkController.__init__.__code__ in main_thread_codes()


def is_beat(argv: Sequence[str]) -> bool:
    return runs_this_process(argv) and "beat" in argv[1:]


def _is_worker_command(argv: Sequence[str]) -> bool:
    return started_as(argv, "celery") and "worker" in argv[1:]


def connect(serve_here: Callable[[str], None], close_engine: Callable[[], None]) -> None:
    """Wire Celery's signals (idempotent): a pool in the main process serves there; a pool process closes."""
    from celery import signals

    def on_worker_init(sender: Any = None, **kwargs: Any) -> None:
        pool_cls = getattr(sender, "pool_cls", None)
        if pool_cls is not None and not pool_forks(pool_cls):
            serve_here(f"Celery worker with the {getattr(pool_cls, '__module__', pool_cls)} pool")

    def on_worker_process_shutdown(**kwargs: Any) -> None:
        try:
            close_engine()  # closes the session: the other processes take over at once
        except Exception:
            logger.exception("django-simba: closing the session of the pool process failed")

    signals.worker_init.connect(on_worker_init, weak=False, dispatch_uid="django_simba.worker_init")
    signals.worker_process_shutdown.connect(
        on_worker_process_shutdown, weak=False, dispatch_uid="django_simba.worker_process_shutdown"
    )


def pool_forks(pool_cls: Any) -> bool:
    """Whether the pool runs tasks in processes forked from the main one."""
    from celery.concurrency import get_implementation
    from celery.concurrency.prefork import TaskPool

    pool = get_implementation(pool_cls) if isinstance(pool_cls, str) else pool_cls
    return isinstance(pool, type) and issubclass(pool, TaskPool)
