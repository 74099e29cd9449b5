"""Async counterparts of the public API, for async views, consumers and tasks.

::

    from django_simba import alock, asemaphore, aelection, agroup, aowner, aleases

    async with alock("invoices:42", timeout=5) as term:
        await save(invoice, fence=term.token)

They share the process's one engine and session with the sync API: an ``alock`` and
a ``lock`` of the same name exclude each other. A coroutine waiting for a lock, for a
session or for an election's answer holds no thread: the engine wakes it on its own
event loop. One-shot backend calls (``aowner``, ``aleases``, a group's ``members``)
run in the loop's default executor, so the loop never waits on the network.

Cancellation is safe: a cancelled ``acquire`` leaves the line at once and never leaves
the lock held (a term granted as it was cancelled is released at once); a release or
close that has started always finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from .engine import AsyncLock, AsyncSemaphore, EndReason, Term
from .engine.callbacks import check_callback
from .engine.config import check_seconds
from .engine.waiters import session_live
from .spi import LeaseInfo, Member, validate_name

if TYPE_CHECKING:
    from .engine import Election, Group

logger = logging.getLogger("django_simba.aio")

R = TypeVar("R")

#: How long the callback thread waits for a coroutine callback before running the next callback.
CALLBACK_WAIT = 30.0

#: A callback may be a plain function (run on the engine's callback thread) or a coroutine function
#: (run on the event loop that created the election or group).
TermCallback = Callable[[Term], Any]


async def _in_thread(fn: Callable[..., R], *args: Any) -> R:
    """Run a one-shot blocking call in a worker thread and wait for it, even when cancelled meanwhile.

    A call that has started cannot be stopped; shielding it means it is never
    silently abandoned half-way (closes always finish).
    """
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    future = loop.run_in_executor(None, functools.partial(context.run, fn, *args))
    return await asyncio.shield(future)


def _get_engine() -> Any:
    from .registry import get_engine

    return get_engine()


def alock(
    name: str,
    timeout: float | None = None,
    *,
    max_hold: float | None = None,
    on_lost: Callable[[Term, EndReason], Any] | None = None,
) -> AsyncLock:
    """A lock on ``name`` for coroutines: ``async with alock("invoices:42", timeout=5) as term: ...``.

    Same arguments as :func:`django_simba.lock`; ``on_lost`` runs on the engine's callback thread.
    Not re-entrant: a task that acquires a lock it already holds gets
    :class:`~django_simba.LockHeld`. Tasks may share one lock: each waits in line with its own
    timeout, holds a term with a new token of its own, and releases only that term
    (``release(term)`` gives back the one it names, from any task); a task whose term ended
    meanwhile gets ``LeaseLost`` from its exit, and the task holding the lock now is left alone.
    The engine is looked up at each acquisition, so a lock made at import time reads no settings.
    """
    return AsyncLock(_get_engine, name, timeout=timeout, max_hold=max_hold, on_lost=on_lost)


def asemaphore(
    name: str,
    permits: int,
    timeout: float | None = None,
    *,
    max_hold: float | None = None,
    on_lost: Callable[[Term, EndReason], Any] | None = None,
) -> AsyncSemaphore:
    """At most ``permits`` holders of ``name`` at once, for coroutines:
    ``async with asemaphore("exports", 3) as term: ...``.

    Same arguments as :func:`django_simba.semaphore`. A waiting task holds no thread. The engine
    is looked up at each acquisition, like :func:`alock`'s.
    """
    return AsyncSemaphore(_get_engine, name, permits, timeout=timeout, max_hold=max_hold, on_lost=on_lost)


class _LoopNotifier:
    """Runs user callbacks that may be coroutine functions, and wakes waiters on the creating loop."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.changed = asyncio.Event()

    def wake(self) -> None:
        self._call_soon(self.changed.set)

    def run(self, callback: Callable[..., Any] | None, *args: Any) -> None:
        """Called on the engine's callback thread."""
        if callback is None:
            return
        if not inspect.iscoroutinefunction(callback):
            callback(*args)
            return
        coroutine = callback(*args)
        try:
            future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        except RuntimeError:
            coroutine.close()
            logger.warning("django-simba: the event loop is closed; callback %r not run", callback)
            return
        future.add_done_callback(_log_callback_error)
        # Callbacks run one at a time, in the order of their events: the next one (on_revoked
        # after on_elected, say) waits for this coroutine, within a bound.
        with contextlib.suppress(Exception):  # its failure is logged by the done callback
            future.result(CALLBACK_WAIT)

    def _call_soon(self, fn: Callable[[], Any]) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            self.loop.call_soon_threadsafe(fn)


def _log_callback_error(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.error("django-simba: async callback failed", exc_info=future.exception())


class AsyncElection:
    """A candidacy for ``name``, for coroutines; see :func:`aelection`.

    ``is_leader`` and ``term`` are checked in memory (no I/O), like the sync API.
    """

    def __init__(
        self,
        name: str,
        on_elected: TermCallback | None = None,
        on_revoked: TermCallback | None = None,
        *,
        serving_only: bool = True,
    ) -> None:
        self.name = validate_name(name)
        self.serving_only = serving_only
        check_callback("on_elected", on_elected)
        check_callback("on_revoked", on_revoked)
        self.on_elected = on_elected
        self.on_revoked = on_revoked
        self._election: Election | None = None
        self._notifier: _LoopNotifier | None = None
        self._starting = asyncio.Lock()

    async def start(self) -> AsyncElection:
        """Begin contending (idempotent)."""
        async with self._starting:
            if self._election is not None:
                return self
            notifier = self._notifier = _LoopNotifier()

            def elected(term: Term) -> None:
                notifier.wake()
                notifier.run(self.on_elected, term)

            def revoked(term: Term) -> None:
                notifier.wake()
                notifier.run(self.on_revoked, term)

            election: Election = await _in_thread(
                lambda: _get_engine().election(
                    self.name, on_elected=elected, on_revoked=revoked, serving_only=self.serving_only
                )
            )
            election.add_listener(notifier.wake)  # refused, or the engine closed: a decision too
            self._election = election
            return self

    def __await__(self) -> Any:
        return self.start().__await__()

    @property
    def election(self) -> Election:
        if self._election is None:
            raise RuntimeError("the election is not started: await it first")
        return self._election

    @property
    def term(self) -> Term | None:
        return self._election.term if self._election is not None else None

    @property
    def is_leader(self) -> bool:
        return self.term is not None

    async def wait_elected(self, timeout: float | None = None) -> Term:
        """Wait until this candidate leads; :class:`TimeoutError` after ``timeout`` seconds."""
        timeout = check_seconds("timeout", timeout)
        await self.start()
        notifier = self._notifier
        assert notifier is not None
        async with asyncio.timeout(timeout):
            while True:
                notifier.changed.clear()
                term = self.term
                if term is not None:
                    return term
                await notifier.changed.wait()

    async def wait_decided(self, timeout: float | None = None) -> bool:
        """Wait for the first answer (won, or led elsewhere); False on timeout."""
        timeout = check_seconds("timeout", timeout)
        await self.start()
        notifier = self._notifier
        assert notifier is not None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    notifier.changed.clear()
                    if self.election.wait_decided(0):
                        return True
                    await notifier.changed.wait()
        except TimeoutError:
            return False

    async def leader(self) -> LeaseInfo | None:
        """Who leads now, as the backend sees it."""
        return await aowner(self.name)

    async def close(self) -> None:
        """Stop contending; a leader releases at once (``on_revoked`` runs)."""
        if self._election is not None:
            await _in_thread(self._election.close)

    async def __aenter__(self) -> AsyncElection:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncElection {self.name!r} leader={self.is_leader}>"


def aelection(
    name: str,
    on_elected: TermCallback | None = None,
    on_revoked: TermCallback | None = None,
    *,
    serving_only: bool = True,
) -> AsyncElection:
    """A candidacy for ``name``: ``e = await aelection("scheduler")`` or ``async with aelection(...) as e``.

    Callbacks may be coroutine functions; they then run on the current event loop. ``serving_only``
    as for :func:`django_simba.election`.
    """
    return AsyncElection(name, on_elected, on_revoked, serving_only=serving_only)


class AsyncGroup:
    """A handle on group ``name`` for coroutines; see :func:`agroup`."""

    def __init__(self, name: str, on_change: Callable[[list[Member]], Any] | None = None) -> None:
        self.name = validate_name(name)
        check_callback("on_change", on_change)
        self.on_change = on_change
        self._group: Group | None = None
        self._creating = asyncio.Lock()

    async def _handle(self) -> Group:
        async with self._creating:
            if self._group is not None:
                return self._group
            on_change = self.on_change
            callback: Callable[[list[Member]], Any] | None = None
            if on_change is not None:
                notifier = _LoopNotifier()
                callback = functools.partial(notifier.run, on_change)
            group: Group = await _in_thread(lambda: _get_engine().group(self.name, on_change=callback))
            self._group = group
            return group

    @property
    def joined(self) -> bool:
        return self._group is not None and self._group.joined

    async def join(self, timeout: float | None = None) -> None:
        """Become a member for as long as this process's sessions live (until :meth:`leave`)."""
        timeout = check_seconds("timeout", timeout)
        group = await self._handle()
        engine = _get_engine()
        await session_live(engine, engine.backend.timeout if timeout is None else timeout)
        await _in_thread(group.join, timeout)  # a session is live: one round trip

    async def leave(self) -> None:
        group = await self._handle()
        await _in_thread(group.leave)

    async def members(self) -> list[Member]:
        """Live members, sorted by session id."""
        group = await self._handle()
        return await _in_thread(group.members)

    async def is_member(self) -> bool:
        group = await self._handle()
        return await _in_thread(group.is_member)

    async def close(self) -> None:
        """Leave (if joined) and stop watching."""
        if self._group is not None:
            await _in_thread(self._group.close)

    async def __aenter__(self) -> AsyncGroup:
        await self.join()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncGroup {self.name!r} joined={self.joined}>"


def agroup(name: str, on_change: Callable[[list[Member]], Any] | None = None) -> AsyncGroup:
    """A handle on group ``name``; ``async with agroup("workers") as g`` joins and leaves.

    ``on_change(members)`` may be a coroutine function; it then runs on the current event loop.
    """
    return AsyncGroup(name, on_change)


async def aowner(name: str) -> LeaseInfo | None:
    """Who holds ``name`` now, or ``None`` (see :func:`django_simba.owner`)."""
    validate_name(name)
    return await _in_thread(lambda: _get_engine().owner(name))


async def aleases(prefix: str = "") -> list[LeaseInfo]:
    """Every live lease whose name starts with ``prefix`` (see :func:`django_simba.leases`)."""
    return await _in_thread(lambda: _get_engine().leases(prefix))


__all__ = [
    "AsyncElection",
    "AsyncGroup",
    "AsyncLock",
    "aelection",
    "agroup",
    "aleases",
    "alock",
    "aowner",
]
