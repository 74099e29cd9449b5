"""``@singleton_task``: run a function on one instance of the cluster only.

``mode="leader"`` (the default): the process keeps a candidacy for the task's
name; a call runs only while this process is the elected leader, and is
skipped elsewhere. Suits periodic jobs fired on every host (cron, Celery beat
on several nodes, a scheduler thread per worker).

``mode="lock"``: a call runs while holding the lock of the task's name, waiting
up to ``timeout`` seconds (0: skip at once when another instance runs it).

Works on plain functions, Celery / RQ task functions (put it under
``@app.task``) and a management command's ``handle``. A skipped call returns a
:class:`Skipped` value, which is falsy, and logs why; the term is available to
the function as ``current_term()`` for fencing.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, ParamSpec, TypeVar

from .engine import Election, Term
from .errors import LeaseLost
from .spi import LeaseInfo, LockTimeout, validate_name

logger = logging.getLogger("django_simba.tasks")

P = ParamSpec("P")
R = TypeVar("R")

_local = threading.local()


@dataclass(frozen=True, slots=True)
class Skipped:
    """What a skipped call returns: falsy, with the reason and who holds the name."""

    name: str
    reason: str
    holder: LeaseInfo | None = None

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        holder = f" (held by {self.holder.metadata or self.holder.session_id})" if self.holder else ""
        return f"skipped {self.name}: {self.reason}{holder}"


def current_term() -> Term | None:
    """The term under which the current ``@singleton_task`` call runs (for fencing)."""
    return getattr(_local, "term", None)


def task_name_for(fn: Callable[..., Any]) -> str:
    """A default lease name from the function's module and qualified name."""
    raw = f"task:{fn.__module__}.{fn.__qualname__}"
    return re.sub(r"[^A-Za-z0-9._:-]", "_", raw)[:128]


def singleton_task(
    name: str | None = None,
    mode: Literal["leader", "lock"] = "leader",
    *,
    timeout: float = 0,
    max_hold: float | None = None,
    wait_for_election: float | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R | Skipped]]:
    """Decorate a function so that it runs on one instance only (see the module docstring).

    ``wait_for_election``: on the first call in a process, how long to wait for
    the election's first answer (default: the backend timeout), so the first
    call on the leader is not skipped.
    """
    if mode not in ("leader", "lock"):
        raise ValueError(f"mode must be 'leader' or 'lock', not {mode!r}")
    if name is not None:
        validate_name(name)

    def decorate(fn: Callable[P, R]) -> Callable[P, R | Skipped]:
        task = name or task_name_for(fn)
        runner = (
            _LeaderRunner(task, wait_for_election)
            if mode == "leader"
            else _LockRunner(task, timeout, max_hold)
        )

        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R | Skipped:
            return runner.run(lambda: fn(*args, **kwargs))

        run.simba_name = task  # type: ignore[attr-defined]
        run.simba_mode = mode  # type: ignore[attr-defined]
        return run

    return decorate


def _call_with_term(term: Term, call: Callable[[], R]) -> R:
    previous = getattr(_local, "term", None)
    _local.term = term
    try:
        return call()
    finally:
        _local.term = previous


class _LockRunner:
    def __init__(self, name: str, timeout: float, max_hold: float | None) -> None:
        self.name, self.timeout, self.max_hold = name, timeout, max_hold

    def run(self, call: Callable[[], R]) -> R | Skipped:
        from .registry import get_engine

        engine = get_engine()
        lock = engine.lock(self.name, max_hold=self.max_hold)
        try:
            term = lock.acquire(self.timeout)
        except LockTimeout:
            skipped = Skipped(self.name, "another instance holds the lock", engine.owner(self.name))
            logger.info("%s", skipped)
            return skipped
        try:
            return _call_with_term(term, call)
        finally:
            try:
                lock.release()
            except LeaseLost as lost:  # the call is over: say it outlived its term, keep its result
                logger.warning("django-simba: %s: %s", self.name, lost)


class _LeaderRunner:
    """Keeps one candidacy per process for the task's name, made on first call."""

    def __init__(self, name: str, wait: float | None) -> None:
        self.name, self.wait = name, wait
        self._election: Election | None = None
        self._mutex = threading.Lock()

    def election(self) -> Election:
        from .registry import get_engine

        engine = get_engine()
        with self._mutex:
            election = self._election
            if election is None or election.closed or election.engine is not engine:
                election = self._election = engine.election(self.name)
        wait = engine.backend.timeout if self.wait is None else self.wait
        election.wait_decided(wait)
        return election

    def run(self, call: Callable[[], R]) -> R | Skipped:
        election = self.election()
        term = election.term
        if term is None:
            skipped = Skipped(self.name, "this instance is not the leader", election.leader())
            logger.info("%s", skipped)
            return skipped
        return _call_with_term(term, call)
