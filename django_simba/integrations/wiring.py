"""What ``AppConfig.ready()`` wires for the server that runs this process."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from . import runserver


def wire_servers(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Celery's signals and uWSGI's hooks where they run; what runserver's processes need to close."""
    argv = sys.argv if argv is None else argv
    environ = os.environ if environ is None else environ
    if "celery" in sys.modules:
        from . import celery

        celery.connect()
    if "uwsgi" in sys.modules:
        from . import uwsgi

        uwsgi.connect()
    if runserver.is_watcher(argv, environ):
        runserver.watch_for_the_child()
    elif runserver.is_serving_child(argv, environ):
        runserver.report_to_the_watcher()
    elif runserver.is_without_reloader(argv):
        from .termination import close_on_sigterm

        close_on_sigterm()  # nothing else stops it but the default action of SIGTERM
