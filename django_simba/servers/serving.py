"""Whether this process serves: which processes take part in elections, and which only start those that do.

A process **serves** when it is known to: a server's worker or a task worker
(see :func:`detect`), ``simba_run``, a test run, or a command or program named in
``SIMBA["SERVING_COMMANDS"]``. Every other process (``manage.py shell``,
``migrate``, ``help``, ``changepassword``, a script) does not: its engine opens no
session by itself and a candidacy started there never leads (an election made
with ``serving_only=False`` still contends). Locks, semaphores and groups work
in every process: the caller asked for a session.

A process that **forks the processes that serve** (gunicorn's master with
``--preload``, uWSGI's master, Celery's prefork main process, the autoreloader's
watcher) holds as well, and keeps the candidacies begun there for the processes
it forks (``django_simba.engine.prefork``).

The rules, first match wins:

1. a forked child takes its parent's part, but the child of a process that forks
   servers serves (unless the fork only daemonizes gunicorn's master);
2. ``SIMBA["PREFORK_PARENT"] = True``: this process forks the processes that serve;
3. a test run (pytest, ``manage.py test``) serves, so tests can lead (nothing
   starts by itself there, though: see :mod:`.autostart`);
4. the autoreloader's watcher (``runserver``, ``db_worker --reload``) forks;
5. unless ``PREFORK_PARENT`` is False: gunicorn's master, uWSGI's master and
   Celery's worker main process fork (the latter until ``worker_init`` names a
   pool that runs the tasks in that process: then it serves);
6. gunicorn, uWSGI and uvicorn workers, Celery's pool processes and ``celery
   beat``, RQ workers, the autoreloader's child, ``runserver --noreload``,
   ``db_worker`` and ``simba_run`` serve;
7. a management command or program named in ``SIMBA["SERVING_COMMANDS"]`` serves;
8. no other process serves.

The rules are checked once per process, at the first question (the stack is where
a server is recognised, so that is while the application loads).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from ..engine import Engine
from ..engine.prefork import hold_for_children
from ..engine.prefork import serve_here as serve_held
from . import autoreloader, celery, gunicorn, rq, uvicorn, uwsgi
from .recognise import management_command, program_name, test_run

logger = logging.getLogger("django_simba")

#: Management commands that serve whatever the settings say.
SERVING_MANAGEMENT_COMMANDS = frozenset({"simba_run", "db_worker"})


class Role(Enum):
    SERVES = "serves"
    FORKS = "forks the processes that serve"
    IDLE = "does not serve"


@dataclass(frozen=True, slots=True)
class Decision:
    """What this process is, and why."""

    role: Role
    why: str

    @property
    def serves(self) -> bool:
        return self.role is Role.SERVES

    def __str__(self) -> str:
        return f"this process {self.role.value} ({self.why})"


#: (pid, decision): what this process learnt it is (forked; serve_here), then what the rules found.
_learnt: tuple[int, Decision] | None = None
_detected: tuple[int, Decision] | None = None
_lock = threading.Lock()


def is_serving_process() -> bool:
    """True when this process serves: its elections contend and can lead (see the module's docstring)."""
    return decision().serves


def decision() -> Decision:
    """This process's :class:`Decision` (decided once per process)."""
    global _detected
    pid = os.getpid()
    with _lock:
        if _learnt is not None and _learnt[0] == pid:
            return _learnt[1]
        if _detected is None or _detected[0] != pid:
            prefork_parent, commands = rule_settings()
            found = detect(
                sys.argv,
                os.environ,
                prefork_parent=prefork_parent,
                serving_commands=commands,
                debug=debug_setting(),
            )
            _detected = (pid, found)
        return _detected[1]


def detect(
    argv: Sequence[str],
    environ: Mapping[str, str],
    *,
    prefork_parent: bool | None = None,
    serving_commands: Collection[str] = (),
    debug: bool = False,
) -> Decision:
    """Rules 2 to 8 of the module's docstring, for this command line."""
    command = management_command(argv)
    shown = f"manage.py {command}" if command else (program_name(argv) or "python")
    if prefork_parent:
        return Decision(Role.FORKS, "SIMBA['PREFORK_PARENT'] is True")
    testing = test_run(argv, environ)
    if testing:
        return Decision(Role.SERVES, testing)
    if autoreloader.is_watcher(argv, environ, debug):
        return Decision(Role.FORKS, "the autoreloader's watcher (its child serves)")
    if prefork_parent is None:
        if gunicorn.is_master(argv):
            return Decision(Role.FORKS, "gunicorn's master (its workers serve)")
        if uwsgi.is_master():
            return Decision(Role.FORKS, "uWSGI's master (its workers serve)")
        if celery.is_worker_main(argv):
            return Decision(Role.FORKS, "Celery's worker main process (its pool processes serve)")
    server = _known_server(argv, environ, command, debug)
    if server:
        return Decision(Role.SERVES, server)
    if (command or program_name(argv)) in serving_commands:
        return Decision(Role.SERVES, f"{shown} is named in SIMBA['SERVING_COMMANDS']")
    return Decision(Role.IDLE, f"{shown} is not a server or worker, nor named in SIMBA['SERVING_COMMANDS']")


def _known_server(argv: Sequence[str], environ: Mapping[str, str], command: str | None, debug: bool) -> str:
    """Rule 6: what serves this process, or ""."""
    if gunicorn.runs_this_process(argv):
        return "a gunicorn process"
    if uwsgi.runs_this_process(argv):
        return "a uWSGI worker"
    if uvicorn.runs_this_process(argv):
        return "uvicorn"
    if celery.is_pool_process():
        return "a Celery pool process"
    if celery.is_beat(argv):
        return "celery beat"
    if celery.is_worker_main(argv):
        return "a Celery worker"  # PREFORK_PARENT False: its pool runs here
    if rq.is_worker(argv):
        return "an RQ worker"
    if autoreloader.is_serving_child(argv, environ, debug):
        return f"the autoreloader's child (manage.py {command})"
    if autoreloader.is_runserver_without_reloader(argv) or command in SERVING_MANAGEMENT_COMMANDS:
        return f"manage.py {command}"
    return ""


def rule_settings() -> tuple[bool | None, frozenset[str]]:
    """PREFORK_PARENT and SERVING_COMMANDS, as far as they are valid (the checks report the rest)."""
    from .. import conf

    parsed, _ = conf.parse(conf.raw_settings())
    return (parsed.prefork_parent, parsed.serving_commands) if parsed is not None else (None, frozenset())


def debug_setting() -> bool:
    from django.conf import settings

    return bool(getattr(settings, "DEBUG", False))


def apply(engine: Engine) -> None:
    """Make a newly built engine hold when this process does not serve (a hook of the registry)."""
    engine.fork_hold.child_serves = forked_child_serves
    found = decision()
    if not found.serves:
        logger.debug("django-simba: no session of its own here: %s", found)
        hold_for_children(engine)


def decide_again() -> None:
    """Forget what the rules found: the next question applies them again (a setting they read,
    ``SIMBA`` or ``DEBUG``, changed; in tests, ``override_settings``)."""
    global _detected
    with _lock:
        _detected = None


def serve_here(why: str) -> None:
    """This process serves after all: decide so, and start what its engine held."""
    global _learnt
    with _lock:
        _learnt = (os.getpid(), Decision(Role.SERVES, why))
    from .. import registry

    engine = registry.peek_engine()
    if engine is not None:
        serve_held(engine)


def forked_child_serves() -> bool:
    """Asked in a forked child (after :func:`after_fork_in_child`): does it take the held candidacies?"""
    return decision().serves


def after_fork_in_child() -> None:
    """Rule 1, in a forked child: Python's fork hook, and uWSGI's (it forks without Python's hooks)."""
    global _learnt, _lock
    _lock = threading.Lock()  # another thread may have held it at the fork
    parent = _learnt if _learnt is not None else _detected
    if parent is None:
        return
    role, why = parent[1].role, parent[1].why
    if role is Role.FORKS and not gunicorn.is_daemonizing():
        role, why = Role.SERVES, f"forked from a process that forks the processes that serve ({why})"
    _learnt = (os.getpid(), Decision(role, why))


os.register_at_fork(after_in_child=after_fork_in_child)
