"""Recognising gunicorn's processes: the master, which forks the workers, and the workers, which serve.

With ``--preload`` (or a config file that sets Django up) the master loads the
application before it forks: it must hold nothing itself. A worker loads the
application from ``Worker.init_process`` (without ``--preload``) or was forked
from the master; the master's main thread never runs that method. Nothing here
imports gunicorn: a process that gunicorn does not run has none of its modules.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .recognise import current_codes, main_thread_codes, started_as


def runs_this_process(argv: Sequence[str]) -> bool:
    """True when gunicorn runs this process (its master or one of its workers)."""
    if started_as(argv, "gunicorn"):
        return True
    arbiter = sys.modules.get("gunicorn.arbiter")
    return arbiter is not None and any(code.co_filename == arbiter.__file__ for code in main_thread_codes())


def is_master(argv: Sequence[str]) -> bool:
    """True in gunicorn's master: gunicorn runs this process, and not as one of its workers."""
    return "gunicorn.arbiter" in sys.modules and runs_this_process(argv) and not _in_worker()


def _in_worker() -> bool:
    worker_base = sys.modules.get("gunicorn.workers.base")
    return worker_base is not None and worker_base.Worker.init_process.__code__ in main_thread_codes()


def is_daemonizing() -> bool:
    """True while gunicorn forks to daemonize (``--daemon``): that child is the master again."""
    util = sys.modules.get("gunicorn.util")
    return util is not None and util.daemonize.__code__ in current_codes()
