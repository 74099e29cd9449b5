"""What the app's configuration wires: the registry's steps for every engine, and each server's hooks.

:func:`compose` runs when Django creates the app's configuration, before any
``ready()`` (an election started in another app's ``ready()`` gets a rightly built
engine); :func:`wire_servers` runs from ``ready()``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from .. import registry, signals
from ..integrations import prometheus
from . import autoreloader, serving
from .termination import CLOSE_TIMEOUT, close_engine, close_on_sigterm


def compose() -> None:
    """Hand the registry what it does to every engine: the serving rule, the signals, the metrics."""
    registry.configure([serving.apply, signals.observe, prometheus.install_metrics])


def wire_servers(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Celery's signals and uWSGI's hooks where they run; what the autoreloader's processes need to close."""
    argv = sys.argv if argv is None else argv
    environ = os.environ if environ is None else environ
    if "celery" in sys.modules:
        from . import celery

        celery.connect(serving.serve_here, registry.reset)
    if "uwsgi" in sys.modules:
        from . import uwsgi

        uwsgi.connect(start_over_in_child, lambda: close_engine(CLOSE_TIMEOUT))
    debug = serving.debug_setting()
    if autoreloader.is_watcher(argv, environ, debug):
        autoreloader.watch_for_the_child(close_session)
    elif autoreloader.is_serving_child(argv, environ, debug):
        autoreloader.report_to_the_watcher()
    elif autoreloader.is_runserver_without_reloader(argv):
        close_on_sigterm()  # nothing else stops it but the default action of SIGTERM


def start_over_in_child() -> None:
    """In a process uWSGI's master forked: what Python's fork hooks would have done there."""
    from ..engine import process

    serving.after_fork_in_child()
    process.reset_engines_in_child()  # at once, with what the master kept for its children


def close_session(session_id: str) -> None:
    """Close a session by id on the configured backend (one the autoreloader's child left open)."""
    from ..conf import get_settings

    backend = registry.build_backend(get_settings())
    try:
        backend.close_session(session_id)
    finally:
        backend.close()
