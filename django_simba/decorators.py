"""``@singleton_task``: run a function on one instance of the cluster only.

``mode="leader"`` (the default): the process keeps a candidacy for the task's
name; a call runs only while this process is the elected leader, and is
skipped elsewhere. Suits periodic jobs fired on every host (cron, a scheduler
thread per process), where every host makes the call and one of them leads.

``mode="lock"``: a call runs while holding the lock of the task's name, waiting
up to ``timeout`` seconds (0: skip at once when another instance runs it).
With ``permits=N`` (lock mode, the default then), a call holds one permit of a
semaphore of that name instead: at most N calls run at once in the whole
cluster, and the next one waits or is skipped.
**Use lock mode for queued tasks** (Celery, RQ, Django's task framework): a
queued call runs on whichever worker takes it from the queue, and in leader
mode a call taken by a worker that is not the leader is skipped, so it runs
nowhere. A leader-mode call inside a Celery task or an RQ job logs a warning
saying so, once per process.

Works on plain functions, coroutine functions (in lock mode a waiting call
holds no thread, as an ``alock`` waiter; the call is awaited under the term), Celery / RQ task
functions (put it under ``@app.task``), Django tasks (see
:mod:`django_simba.task_framework`) and a management command's ``handle``.
A skipped call returns a :class:`Skipped` value and logs why; the term is
available to the function as ``current_term()`` for fencing.

In lock mode the name may come from each call's arguments, as a template
(``"invoice:{invoice_id}"``) or a function: one lock per value (see
:mod:`django_simba.task_names`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import re
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, ParamSpec, TypeVar, cast

from .engine import Election, Lock, Term
from .engine.semaphore import permit_names
from .errors import LeaseLost
from .spi import MAX_NAME_LENGTH, LeaseInfo, LockTimeout, SimbaError, redact, validate_name
from .task_names import CallNames, NameSpec, is_template, name_per_call

logger = logging.getLogger("django_simba.tasks")

P = ParamSpec("P")
R = TypeVar("R")

#: The term of the call running in this thread or task (a context variable: it follows async code).
_current_term: ContextVar[Term | None] = ContextVar("django_simba_current_term", default=None)


class Skipped(dict[str, Any]):
    """What a skipped call returns: a successful result that says why, falsy for plain callers.

    It is a dict of JSON values, ``{"skipped": True, "name": ..., "reason": ...,
    "holder": {...} or None}``, so that every result backend stores it as it
    stores any result (Celery's and RQ's JSON serializers, pickle, Django's task
    framework). What a result backend gives back is a plain dict: turn it back
    with :meth:`from_result`.
    """

    __slots__ = ()

    def __init__(self, name: str, reason: str, holder: LeaseInfo | None = None) -> None:
        held_by = None if holder is None else {field: getattr(holder, field) for field in _HOLDER_FIELDS}
        super().__init__(skipped=True, name=name, reason=reason, holder=held_by)

    @classmethod
    def from_result(cls, value: object) -> Skipped | None:
        """The skip a stored result stands for, or None when the call was not skipped."""
        if isinstance(value, Skipped):
            return value
        if not (isinstance(value, Mapping) and value.get("skipped") is True):
            return None
        name, reason, held_by = value.get("name"), value.get("reason"), value.get("holder")
        if not (isinstance(name, str) and isinstance(reason, str)):
            return None
        holder = None
        if isinstance(held_by, Mapping) and set(held_by) >= set(_HOLDER_FIELDS):
            holder = LeaseInfo(**{field: held_by[field] for field in _HOLDER_FIELDS})
        return cls(name, reason, holder)

    @property
    def name(self) -> str:
        return str(self["name"])

    @property
    def reason(self) -> str:
        return str(self["reason"])

    @property
    def holder(self) -> LeaseInfo | None:
        """Who held the name when the call was skipped, if anyone was seen."""
        held_by = self["holder"]
        return None if held_by is None else LeaseInfo(**held_by)

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        holder = self.holder
        held_by = f" (held by {holder.metadata or holder.session_id})" if holder else ""
        return f"skipped {self.name}: {self.reason}{held_by}"

    def __repr__(self) -> str:
        return f"Skipped(name={self.name!r}, reason={self.reason!r}, holder={self.holder!r})"


_HOLDER_FIELDS = ("name", "session_id", "token", "remaining", "metadata")


def current_term() -> Term | None:
    """The term under which the current ``@singleton_task`` call runs (for fencing)."""
    return _current_term.get()


def task_name_for(fn: Callable[..., Any], *, length: int = 128) -> str:
    """A default lease name from the function's module and qualified name, at most ``length`` long."""
    raw = f"task:{fn.__module__}.{fn.__qualname__}"
    return re.sub(r"[^A-Za-z0-9._:-]", "_", raw)[:length]


def singleton_task(
    name: NameSpec | None = None,
    mode: Literal["leader", "lock"] | None = None,
    *,
    timeout: float = 0,
    max_hold: float | None = None,
    wait_for_election: float | None = None,
    permits: int | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R | Skipped]]:
    """Decorate a function so that it runs on one instance only (see the module docstring).

    ``mode``: ``"leader"`` by default, ``"lock"`` when ``permits`` is given.
    ``wait_for_election``: on the first call in a process, how long to wait for
    the election's first answer (default: the backend timeout), so the first
    call on the leader is not skipped. ``permits``: at most that many calls at
    once in the cluster, each holding a permit of a semaphore (lock mode only).

    ``name`` may be a template filled with each call's arguments, ``"invoice:{invoice_id}"``,
    or a function of them (lock mode only; see :mod:`django_simba.task_names`): one lock per
    value, checked against the function's signature when decorating.
    """
    if mode is None:
        mode = "leader" if permits is None else "lock"
    if mode not in ("leader", "lock"):
        raise ValueError(f"mode must be 'leader' or 'lock', not {mode!r}")
    if permits is not None:
        if mode != "lock":
            raise ValueError("permits needs mode='lock': in leader mode one instance runs the calls")
        # a count out of range, or a fixed name with no room for ':N'
        permit_names(name if isinstance(name, str) and not is_template(name) else "task", permits)
    room = MAX_NAME_LENGTH - (0 if permits is None else len(f":{permits}"))
    per_call = name_per_call(name, room)  # None for a fixed name (checked here) or the default one
    if per_call is not None and mode == "leader":
        raise ValueError(
            "a singleton_task name made from the call's arguments needs mode='lock': leader mode keeps "
            "a candidacy per name in every process, which would be one per value, for ever"
        )

    def decorate(fn: Callable[P, R]) -> Callable[P, R | Skipped]:
        names = None if per_call is None else CallNames(fn, per_call, _name_check(permits))
        task = None if names is not None else cast(str | None, name) or task_name_for(fn, length=room)
        fixed: _Runner | None = None
        if task is not None:
            fixed = (
                _LeaderRunner(task, wait_for_election)
                if mode == "leader"
                else _LockRunner(task, timeout, max_hold, permits)
            )

        def name_for(*args: Any, **kwargs: Any) -> str:
            """The lease name of a call with these arguments."""
            if task is not None:
                return task
            assert names is not None
            return names(args, kwargs)

        def runner(args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Runner:
            if fixed is not None:
                return fixed  # one runner: in leader mode it keeps the process's candidacy
            return _LockRunner(name_for(*args, **kwargs), timeout, max_hold, permits)

        if inspect.iscoroutinefunction(fn):
            call_async = cast(Callable[..., Awaitable[Any]], fn)

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                return await runner(args, kwargs).run_async(lambda: call_async(*args, **kwargs))

            wrapped = cast(Callable[P, R | Skipped], run_async)
        else:

            @functools.wraps(fn)
            def run(*args: P.args, **kwargs: P.kwargs) -> R | Skipped:
                return runner(args, kwargs).run(lambda: fn(*args, **kwargs))

            wrapped = run
        # the name, or the template (None for a name function); simba_name_for(...) names one call
        wrapped.simba_name = task if names is None else names.shown  # type: ignore[attr-defined]
        wrapped.simba_name_for = name_for  # type: ignore[attr-defined]
        wrapped.simba_mode = mode  # type: ignore[attr-defined]
        wrapped.simba_permits = permits  # type: ignore[attr-defined]
        return wrapped

    return decorate


def _name_check(permits: int | None) -> Callable[[str], object]:
    """The rule a call's name must keep: a lease name's, or with permits, room for ':N' as well."""
    if permits is None:
        return validate_name
    return functools.partial(permit_names, permits=permits)


@dataclass(frozen=True, slots=True)
class _Entered:
    """A call may run: under ``term``; ``leave`` gives back what entering took."""

    term: Term
    leave: Callable[[], None]


def _nothing_to_leave() -> None:
    pass


class _Runner:
    """Enters (takes the lock, or finds this process leading) and runs the call under the term."""

    name: str

    def enter(self) -> _Entered | Skipped:
        raise NotImplementedError

    def run(self, call: Callable[[], R]) -> R | Skipped:
        entered = self.enter()
        if isinstance(entered, Skipped):
            return entered
        reset = _current_term.set(entered.term)
        try:
            return call()
        finally:
            _current_term.reset(reset)
            entered.leave()

    async def run_async(self, call: Callable[[], Awaitable[R]]) -> R | Skipped:
        """For coroutine functions: entering and leaving block (briefly), so they run in a worker thread."""
        from asgiref.sync import sync_to_async

        entered = await sync_to_async(self.enter, thread_sensitive=False)()
        if isinstance(entered, Skipped):
            return entered
        reset = _current_term.set(entered.term)
        try:
            return await call()
        finally:
            _current_term.reset(reset)
            await sync_to_async(entered.leave, thread_sensitive=False)()


class _LockRunner(_Runner):
    """Runs a call under the lock of the name, or under a permit of its semaphore."""

    def __init__(self, name: str, timeout: float, max_hold: float | None, permits: int | None) -> None:
        self.name, self.timeout, self.max_hold, self.permits = name, timeout, max_hold, permits

    def enter(self) -> _Entered | Skipped:
        from .registry import get_engine

        engine = get_engine()
        permits = self.permits
        guard = (
            engine.lock(self.name, max_hold=self.max_hold)
            if permits is None
            else engine.semaphore(self.name, permits, max_hold=self.max_hold)
        )
        try:
            term = guard.acquire(self.timeout)
        except LockTimeout:
            if permits is None:
                skipped = Skipped(self.name, "another instance holds the lock", engine.owner(self.name))
            else:
                skipped = Skipped(self.name, f"all {permits} permits are held")
            logger.info("%s", skipped)
            return skipped
        name = self.name
        # A coroutine's call may leave from another worker thread: a permit is given back by its term.
        release = guard.release if isinstance(guard, Lock) else functools.partial(guard.release, term)

        def leave() -> None:
            try:
                release()
            except LeaseLost as lost:  # the call is over: say it outlived its term, keep its result
                logger.warning("django-simba: %s: %s", name, lost)

        return _Entered(term, leave)

    async def run_async(self, call: Callable[[], Awaitable[R]]) -> R | Skipped:
        """Wait as an ``alock`` waiter does, on the loop: a blocking wait in a worker thread would hold
        one of the loop's few executor threads per waiting call, and the holder's release, queued
        behind them, would wait until they timed out."""
        from .engine import AsyncLock, AsyncSemaphore
        from .registry import get_engine

        engine = get_engine()
        permits = self.permits
        guard: AsyncLock | AsyncSemaphore = (
            engine.alock(self.name, max_hold=self.max_hold)
            if permits is None
            else AsyncSemaphore(engine, self.name, permits, max_hold=self.max_hold)
        )
        try:
            term = await guard.acquire(self.timeout)
        except LockTimeout:
            if permits is None:
                holder = await asyncio.to_thread(engine.owner, self.name)
                skipped = Skipped(self.name, "another instance holds the lock", holder)
            else:
                skipped = Skipped(self.name, f"all {permits} permits are held")
            logger.info("%s", skipped)
            return skipped
        reset = _current_term.set(term)
        try:
            return await call()
        finally:
            _current_term.reset(reset)
            try:
                await (guard.release() if isinstance(guard, AsyncLock) else guard.release(term))
            except LeaseLost as lost:  # as in leave(): the call is over, keep its result
                logger.warning("django-simba: %s: %s", self.name, lost)


class _LeaderRunner(_Runner):
    """Keeps one candidacy per process for the task's name, made on first call."""

    def __init__(self, name: str, wait: float | None) -> None:
        self.name, self.wait = name, wait
        self._election: Election | None = None
        self._mutex = threading.Lock()
        self._warned = False
        #: The skip last logged at INFO: the next is logged so only when the leader (or why) changed.
        self._last_skip: tuple[str, str | None, int | None] | None = None

    def election(self) -> Election:
        from .registry import get_engine

        engine = get_engine()
        with self._mutex:
            election = self._election
            if election is None or election.closed or election.port is not engine:
                election = self._election = engine.election(self.name)
        wait = engine.backend.timeout if self.wait is None else self.wait
        election.wait_decided(wait)
        return election

    def enter(self) -> _Entered | Skipped:
        if not self._warned:
            self._warned = True
            queue = queued_task_runner()
            if queue is not None:
                logger.warning(
                    "django-simba: the leader-mode singleton_task %r runs in %s: a call taken by a "
                    "worker that is not the leader is skipped and runs nowhere; use mode='lock' for "
                    "queued tasks",
                    self.name,
                    queue,
                )
        election = self.election()
        term = election.term
        if term is not None:
            return _Entered(term, _nothing_to_leave)
        skipped = self._skip(election)
        holder = skipped.holder
        seen = (skipped.reason, holder.session_id if holder else None, holder.token if holder else None)
        # Every non-leader skips every call: say so once per change of leader, not at every call.
        logger.log(logging.INFO if seen != self._last_skip else logging.DEBUG, "%s", skipped)
        self._last_skip = seen
        return skipped

    def _skip(self, election: Election) -> Skipped:
        """Why this call does not run here: another leads, this process does not serve, or the backend
        cannot be reached (a periodic caller's next call may run: never an exception)."""
        if election.held:
            from .servers.serving import decision

            return Skipped(self.name, f"{decision()}: leader-mode tasks run in serving processes only")
        try:
            holder = election.leader()
        except SimbaError as error:
            return Skipped(self.name, f"not the leader: the backend cannot be reached ({redact(error)})")
        return Skipped(self.name, "this instance is not the leader", holder)


def queued_task_runner() -> str | None:
    """What queued the current call (``"a Celery task"``, ``"an RQ job"``), or None.

    Looked up only in libraries already imported: a process that uses neither imports neither.
    """
    celery = sys.modules.get("celery")
    if celery is not None and bool(celery.current_task):  # a proxy: falsy outside a task
        return "a Celery task"
    rq = sys.modules.get("rq")
    if rq is not None and rq.get_current_job() is not None:
        return "an RQ job"
    return None
