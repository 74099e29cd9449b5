"""Recognising gunicorn's master, which forks the workers that serve.

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


def is_master(argv: Sequence[str]) -> bool:
    """True in gunicorn's master: gunicorn runs this process, and not as one of its workers."""
    arbiter = sys.modules.get("gunicorn.arbiter")
    if arbiter is None:
        return False
    codes = main_thread_codes()
    worker_base = sys.modules.get("gunicorn.workers.base")
    if worker_base is not None and worker_base.Worker.init_process.__code__ in codes:
        return False
    return started_as(argv, "gunicorn") or any(code.co_filename == arbiter.__file__ for code in codes)


def is_daemonizing() -> bool:
    """True while gunicorn forks to daemonize (``--daemon``): that child is the master again."""
    util = sys.modules.get("gunicorn.util")
    return util is not None and util.daemonize.__code__ in current_codes()
