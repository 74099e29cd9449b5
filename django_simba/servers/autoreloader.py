"""Django's autoreloader (``runserver``, ``db_worker --reload``): its watcher serves nothing, its child does.

The watcher is the process the command was started as: it runs the serving child
(a new process, ``RUN_MAIN=true``) again at every code change. On SIGTERM (and on
a Ctrl+C that the child does not answer within a quarter of a second) Django's
watcher kills that child with SIGKILL: no exit handler runs there, and the child's
session would live on until it expires. So the watcher names a file in the
child's environment, the child writes its pid and session id into it whenever it
opens a session, and the watcher, at its own exit, closes the session of a child
that is gone. Closing an already closed session changes nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..spi import redact
from .recognise import management_command

logger = logging.getLogger("django_simba")

#: The file, named by the watcher in its serving child's environment.
SESSION_FILE_ENV = "SIMBA_RUNSERVER_SESSION_FILE"
#: Django's variable: "true" in the child the autoreloader runs.
CHILD_ENV = "RUN_MAIN"

#: Closes a session by id on the configured backend (handed over by the wiring).
SessionCloser = Callable[[str], None]


def reloads(argv: Sequence[str], debug: bool) -> bool:
    """Whether ``argv`` runs a command under the autoreloader (in its watcher or its child)."""
    command = management_command(argv)
    if command == "runserver":
        return "--noreload" not in argv
    if command == "db_worker":  # django-tasks-db: --reload, by default when DEBUG
        return "--reload" in argv or (debug and "--no-reload" not in argv)
    return False


def is_watcher(argv: Sequence[str], environ: Mapping[str, str], debug: bool = False) -> bool:
    """The autoreloader's watcher: it runs the serving child and serves nothing itself."""
    return reloads(argv, debug) and environ.get(CHILD_ENV) != "true"


def is_serving_child(argv: Sequence[str], environ: Mapping[str, str], debug: bool = False) -> bool:
    return reloads(argv, debug) and environ.get(CHILD_ENV) == "true"


def is_runserver_without_reloader(argv: Sequence[str]) -> bool:
    return management_command(argv) == "runserver" and "--noreload" in argv


def watch_for_the_child(close_session: SessionCloser) -> None:
    """In the watcher: name the file in the environment the child inherits, and read it at exit."""
    if SESSION_FILE_ENV in os.environ:
        return
    descriptor, name = tempfile.mkstemp(prefix="simba-runserver-", suffix=".session")
    os.close(descriptor)
    os.environ[SESSION_FILE_ENV] = name
    atexit.register(close_session_left_by_child, Path(name), close_session)


def report_to_the_watcher() -> None:
    """In the serving child: tell the watcher every session this process opens."""
    if SESSION_FILE_ENV not in os.environ:
        return
    from ..signals import session_opened

    session_opened.connect(_write_session, weak=False, dispatch_uid="django_simba.runserver_session_file")


def _write_session(session_id: str, **kwargs: Any) -> None:
    path = Path(os.environ[SESSION_FILE_ENV])
    written = path.with_name(f"{path.name}.{os.getpid()}")
    written.write_text(f"{os.getpid()} {session_id}\n")
    os.replace(written, path)  # the watcher never reads half a line


def close_session_left_by_child(path: Path, close_session: SessionCloser) -> None:
    """At the watcher's exit: close the session of a child that is gone without closing it."""
    try:
        pid_text, session_id = path.read_text().split()
    except (OSError, ValueError):
        return  # no child session was ever opened
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
    if _alive(int(pid_text)):
        return  # still running: it closes its own session
    try:
        close_session(session_id)
    except Exception as error:
        logger.warning(
            "django-simba: closing the session %s of the autoreloader's child failed: %s",
            session_id,
            redact(error),
        )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
