"""runserver: the autoreloader's watcher closes the session its serving child could not close.

On SIGTERM (and on a Ctrl+C that the child does not answer within a quarter of a
second) Django's watcher kills its serving child with SIGKILL: no exit handler runs
there, and the child's session would live on until it expires. So the watcher
names a file in the child's environment, the child writes its pid and session id
into it whenever it opens a session, and the watcher, at its own exit, closes the
session of a child that is gone. Closing an already closed session changes nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger("django_simba")

#: The file, named by the watcher in its serving child's environment.
HANDOFF_ENV = "SIMBA_RUNSERVER_SESSION_FILE"
_PROGRAMS = ("manage.py", "django-admin", "__main__.py")


def is_watcher(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """The autoreloader's watcher: it runs the serving child and serves nothing itself."""
    return _is_runserver(argv) and "--noreload" not in argv and environ.get("RUN_MAIN") != "true"


def is_serving_child(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    return _is_runserver(argv) and environ.get("RUN_MAIN") == "true"


def is_without_reloader(argv: Sequence[str]) -> bool:
    return _is_runserver(argv) and "--noreload" in argv


def _is_runserver(argv: Sequence[str]) -> bool:
    return len(argv) > 1 and os.path.basename(argv[0]) in _PROGRAMS and argv[1] == "runserver"


def watch_for_the_child() -> None:
    """In the watcher: name the file in the environment the child inherits, and read it at exit."""
    if HANDOFF_ENV in os.environ:
        return
    descriptor, name = tempfile.mkstemp(prefix="simba-runserver-", suffix=".session")
    os.close(descriptor)
    os.environ[HANDOFF_ENV] = name
    atexit.register(close_session_left_by_child, Path(name))


def report_to_the_watcher() -> None:
    """In the serving child: tell the watcher every session this process opens."""
    if HANDOFF_ENV not in os.environ:
        return
    from ..signals import session_opened

    session_opened.connect(_write_session, weak=False, dispatch_uid="django_simba.runserver_handoff")


def _write_session(session_id: str, **kwargs: Any) -> None:
    path = Path(os.environ[HANDOFF_ENV])
    written = path.with_name(f"{path.name}.{os.getpid()}")
    written.write_text(f"{os.getpid()} {session_id}\n")
    os.replace(written, path)  # the watcher never reads half a line


def close_session_left_by_child(path: Path) -> None:
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
    from .. import conf, registry

    backend = registry.build_backend(conf.get_settings())
    try:
        backend.close_session(session_id)
    except Exception as error:
        logger.warning(
            "django-simba: closing the session %s of runserver's child failed: %s", session_id, error
        )
    finally:
        backend.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
