"""uWSGI: the master holds nothing, each worker starts over after its fork, and a stop closes.

Without ``lazy-apps`` uWSGI's master loads the application, then forks every worker
from C: neither Python's fork hooks nor CPython's own after-fork repair run in the
worker. So here:

* the master holds (:func:`is_master`): no session, no thread of ours. A thread of
  the parent that runs at a fork from C can leave the child's interpreter stuck
  (the child inherits the GIL, or a lock, held by a thread it does not have);
* each process the master forks (workers, mules, the spooler) runs uWSGI's
  ``post_fork_hook``, which does there what Python's fork hooks would have done:
  its engine starts over with the candidacies the master kept;
* uWSGI's ``atexit`` hook closes the session. uWSGI calls it in a worker that stops
  between requests, also with ``skip-atexit-teardown`` (which skips Python's own
  exit handlers). The master never runs either.

With ``lazy-apps`` the application loads in each worker after the fork: only the
``atexit`` hook applies. The ``uwsgi`` module exists only in a process uWSGI runs
(its Python plugin builds it in), so nothing here imports it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

logger = logging.getLogger("django_simba")


def api() -> Any | None:
    """uWSGI's Python API, in a process uWSGI runs; None elsewhere."""
    module = sys.modules.get("uwsgi")
    return module if callable(getattr(module, "masterpid", None)) else None


def is_master() -> bool:
    """True in uWSGI's master process (``master``), the one that forks the workers."""
    uwsgi = api()
    return uwsgi is not None and uwsgi.worker_id() == 0 and uwsgi.masterpid() == os.getpid()


def runs_this_process(argv: Sequence[str] = ()) -> bool:
    """True in every process uWSGI runs (master, workers, mules, the spooler)."""
    return api() is not None


def connect(start_over_in_child: Callable[[], None], close_at_exit: Callable[[], None]) -> None:
    """Install uWSGI's hooks (idempotent: ``ready()`` may run twice).

    ``start_over_in_child`` runs in every process the master forks, where Python's fork
    hooks do not; ``close_at_exit`` closes the session of a worker that stops.
    """
    uwsgi = api()
    if uwsgi is None:
        return
    _chain(uwsgi, "atexit", _logged(close_at_exit), first=False)  # the user's exit hook may still use a lock
    if is_master():
        _chain(uwsgi, "post_fork_hook", _logged(start_over_in_child), first=True)
        from ..signals import session_opened

        session_opened.connect(_warn_of_a_session, weak=False, dispatch_uid="django_simba.uwsgi_master")


def _logged(hook: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            hook()
        except Exception:
            logger.exception("django-simba: a uWSGI hook failed")

    return run


def _warn_of_a_session(session_id: str, **kwargs: Any) -> None:
    if is_master():
        logger.warning(
            "django-simba: session %s opened in uWSGI's master (a lock or a group used while the "
            "application loads). The master forks the workers while the session's threads run, "
            "which can leave a worker stuck, and it never closes the session (it expires). Take "
            "the lock in the workers, or set lazy-apps.",
            session_id,
        )


def _chain(uwsgi: Any, name: str, hook: Callable[[], None], *, first: bool) -> None:
    """Set uWSGI's hook ``name`` to run ``hook`` too, keeping the one set before."""
    previous = getattr(uwsgi, name, None)
    if getattr(previous, "runs_simba_hook", False):
        return

    def run_previous() -> None:
        if callable(previous):
            previous()

    before, after = (hook, run_previous) if first else (run_previous, hook)

    def chained() -> None:
        try:
            before()
        finally:
            after()

    chained.runs_simba_hook = True  # type: ignore[attr-defined]
    setattr(uwsgi, name, chained)
