"""What ``AppConfig.ready()`` wires for the server that runs this process."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def wire_servers(argv: Sequence[str] | None = None) -> None:
    """Celery's signals where Celery runs; the SIGTERM handler where runserver would die without it."""
    argv = sys.argv if argv is None else argv
    if "celery" in sys.modules:
        from . import celery

        celery.connect()
    if is_runserver_without_reloader(argv):
        from .termination import close_on_sigterm

        close_on_sigterm()


def is_runserver_without_reloader(argv: Sequence[str]) -> bool:
    return len(argv) > 1 and argv[1] == "runserver" and "--noreload" in argv
