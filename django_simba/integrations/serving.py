"""Whether this process serves, or only starts the processes that do.

A process that does not serve holds nothing: its engine opens no session by
itself and keeps the candidacies begun there for the processes it forks
(``django_simba.engine.prefork``). The rule, first match wins:

1. a child forked from a process that holds serves (unless the fork only
   daemonizes gunicorn's master);
2. ``SIMBA["PREFORK_PARENT"]``, when True or False, decides;
3. runserver's autoreloader watcher holds (the child that serves is a new
   process, which starts its own engine);
4. gunicorn's master holds (it loaded Django before forking: ``--preload``, or a
   config file that sets Django up);
5. uWSGI's master holds (it loaded the application before forking the workers:
   the default, without ``lazy-apps``);
6. Celery's worker main process holds, until ``worker_init`` names a pool that
   runs the tasks in that process (solo, threads, gevent, eventlet);
7. every other process serves.

The rules are checked once per process, when its first engine is built.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Mapping, Sequence

from ..engine import Engine
from ..engine.prefork import hold_for_children
from ..engine.prefork import serve_here as serve_held
from . import celery, gunicorn, runserver, uwsgi

logger = logging.getLogger("django_simba")

#: (pid, holds, why): what this process learnt it is (forked from a holder; serve_here), then what
#: the rules found (checked once: the stack is where a server is recognised).
_learnt: tuple[int, bool, str] | None = None
_detected: tuple[int, bool, str] | None = None
_lock = threading.Lock()


def holds_for_children(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    prefork_parent: bool | None = None,
) -> tuple[bool, str]:
    """Whether this process holds for the processes it starts, and why."""
    global _detected
    pid = os.getpid()
    with _lock:
        if _learnt is not None and _learnt[0] == pid:
            return _learnt[1], _learnt[2]
        if prefork_parent is not None:
            return prefork_parent, f"SIMBA['PREFORK_PARENT'] is {prefork_parent}"
        if _detected is None or _detected[0] != pid:
            found = detect(sys.argv if argv is None else argv, os.environ if environ is None else environ)
            _detected = (pid, *found)
        return _detected[1], _detected[2]


def detect(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[bool, str]:
    """Rules 3 to 7 of the module's docstring."""
    if runserver.is_watcher(argv, environ):
        return True, "the autoreloader's watcher (the serving child starts its own engine)"
    if gunicorn.is_master(argv):
        return True, "gunicorn's master (its workers serve)"
    if uwsgi.is_master():
        return True, "uWSGI's master (its workers serve)"
    if celery.is_worker_main(argv):
        return True, "Celery's worker main process (its pool processes serve)"
    return False, "a serving process"


def apply(engine: Engine, prefork_parent: bool | None) -> None:
    """Make a newly built engine hold when this process does not serve."""
    engine.fork_hold.child_serves = forked_child_serves
    holds, why = holds_for_children(prefork_parent=prefork_parent)
    if holds:
        logger.debug("django-simba: this process holds no session of its own: %s", why)
        hold_for_children(engine)


def serve_here(why: str) -> None:
    """This process serves after all: decide so, and start what its engine held."""
    global _learnt
    with _lock:
        _learnt = (os.getpid(), False, why)
    from .. import registry

    engine = registry.peek_engine()
    if engine is not None:
        serve_held(engine)


def forked_child_serves() -> bool:
    return not gunicorn.is_daemonizing()


def after_fork_in_child() -> None:
    """Rule 1, in a forked child: Python's fork hook, and uWSGI's (it forks without Python's hooks)."""
    global _learnt, _lock
    _lock = threading.Lock()  # another thread may have held it at the fork
    parent = _learnt if _learnt is not None else _detected
    if parent is not None and parent[1]:
        serves = forked_child_serves()
        why = f"forked from a process that holds ({parent[2]})" if serves else parent[2]
        _learnt = (os.getpid(), not serves, why)


os.register_at_fork(after_in_child=after_fork_in_child)
