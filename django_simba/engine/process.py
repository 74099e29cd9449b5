"""The engine and its process: forked children start over, and exit closes the session.

* A child forked with Python's hooks (``os.fork``, multiprocessing, gunicorn, Celery) is
  reset at once by :func:`os.register_at_fork`.
* A child forked from C without them (uWSGI's default prefork) is noticed by its new
  process id on its first use of the engine (:meth:`Engine._ensure_own_process`).
* At interpreter exit every started engine closes its session, so others take over at once.

Either way the child never closes or reuses its parent's session or connections.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engine import Engine

logger = logging.getLogger("django_simba.engine")

# One lock per process id for starting over in a child forked without hooks: made in that child,
# so never one a thread of the parent held at the fork.
_reset_locks: dict[int, threading.Lock] = {}
# Engines to reset in a forked child; weak so an engine can be garbage collected.
_engines: weakref.WeakSet[Engine] = weakref.WeakSet()
_hooks_installed = False
_hooks_lock = threading.Lock()


def track(engine: Engine) -> None:
    """Reset ``engine`` in forked children and close it at exit."""
    global _hooks_installed
    _engines.add(engine)
    with _hooks_lock:
        if not _hooks_installed:
            os.register_at_fork(after_in_child=reset_engines_in_child)
            atexit.register(close_engines_at_exit)
            _hooks_installed = True


def reset_lock(pid: int) -> threading.Lock:
    """The lock that serializes starting over in process ``pid``."""
    return _reset_locks.setdefault(pid, threading.Lock())


def reset_engines_in_child() -> None:
    """What a forked child runs first: Python's fork hook, or a server's own (uWSGI's post-fork hook)."""
    for engine in list(_engines):
        try:
            engine._after_fork_in_child()
        except Exception:
            logger.exception("django-simba: resetting the engine after fork failed")


def close_engines_at_exit() -> None:
    """Close sessions at interpreter exit, so other processes take over at once."""
    for engine in list(_engines):
        if engine.started and not engine.closed:
            try:
                engine.close(timeout=1.0)
            except Exception:
                logger.exception("django-simba: closing the engine at exit failed")
