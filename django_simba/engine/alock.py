"""The lock for coroutines: a waiting coroutine is a contender of the engine, and holds no thread.

The engine grants an :class:`AsyncLock`'s request the way it grants a thread's: the grant
wakes the coroutine on its own event loop. Attempts and releases run on the engine's
contend lane, never on the loop's thread nor an executor's. A cancelled waiter leaves the
line at once (a grant that raced with the cancellation is released, never kept); while it
waits, it keeps its place in the backend's line.

Not re-entrant: a task that acquires a lock it already holds gets :class:`LockHeld`.
Tasks may share one ``AsyncLock`` (the others wait); every acquisition gets a term with
a new token.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from types import EllipsisType, TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ..errors import LeaseLost, LockHeld, LockTimeout
from .lock import LockBase, Request, hopeless
from .term import EndReason, Term
from .waiters import LoopWaiter, on_lane, session_live

if TYPE_CHECKING:
    from .port import Port

P = ParamSpec("P")
R = TypeVar("R")

logger = logging.getLogger("django_simba.engine")


class AsyncLock(LockBase):
    """An exclusive lock on ``name`` for coroutines (see the module docstring)."""

    _holder_task: asyncio.Task[Any] | None = None

    async def acquire(self, timeout: float | EllipsisType | None = ...) -> Term:
        """Wait up to ``timeout`` seconds (``None``: forever; 0: one try); else :class:`LockTimeout`."""
        timeout = self._timeout_for(timeout)
        task = asyncio.current_task()
        if task is not None and self._holder is not None and self._holder_task is task:
            raise LockHeld(f"lock {self.name!r} is already held by this task (locks are not re-entrant)")
        port = self.engine
        loop = asyncio.get_running_loop()
        started = port.now()
        request = Request(self, waits=timeout != 0, waiter=LoopWaiter(loop))
        try:
            error = await self._first_attempt(port, request, timeout)
            if timeout != 0 and not hopeless(error):
                await self._wait(port, request, started, timeout)
        except BaseException:
            self._abandon(port, request)  # cancelled, or the engine failed: never keep a late grant
            raise
        term = self._outcome(port, request, error, timeout)
        self._holder_task = task
        self._hold(port, request, term)
        return term

    async def _first_attempt(
        self, port: Port, request: Request, timeout: float | None
    ) -> BaseException | None:
        """The one attempt a thread would make in its own thread, made on the engine's lane."""
        await session_live(port, self._session_wait(port, timeout))
        return await on_lane(port, lambda: port.acquire_now(request, 0))

    async def _wait(self, port: Port, request: Request, started: float, timeout: float | None) -> None:
        waiter = request.waiter
        assert isinstance(waiter, LoopWaiter)
        while True:
            with port.mutex:
                if request.settled:
                    return
            remaining = None if timeout is None else started + timeout - port.now()
            if remaining is not None and remaining <= 0:
                return
            try:
                await asyncio.wait_for(waiter.wait(), remaining)
            except TimeoutError:
                return

    def _abandon(self, port: Port, request: Request) -> None:
        with port.mutex:
            term = request.term
            if term is None:
                request.abandoned = True
                port.withdraw(request)
            elif not port.closed:
                port.release_later(request, term, EndReason.RELEASED)  # granted as its waiter left

    async def try_acquire(self) -> Term | None:
        """One attempt: the term, or ``None`` when another holder has it."""
        try:
            return await self.acquire(0)
        except LockTimeout:
            return None

    async def release(self) -> None:
        """Release the held term; the backend call finishes even if this task is cancelled.

        Raises like :meth:`Lock.release`: :class:`LeaseNotHeld`, or :class:`LeaseLost` when the
        term had already ended otherwise.
        """
        holder, term = self._unhold()
        self._holder_task = None
        port = self.engine
        reason = await asyncio.shield(on_lane(port, lambda: port.release_now(holder, term)))
        self._released(term, reason)

    async def __aenter__(self) -> Term:
        return await self.acquire()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            await self.release()
            return
        try:
            await self.release()
        except LeaseLost as lost:  # the block's own error is the one to see
            logger.warning("django-simba: %s while the block raised %r", lost, exc)

    def __call__(self, fn: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
        """Use as a decorator on a coroutine function: every call runs while holding the lock."""

        @functools.wraps(fn)
        async def locked(*args: P.args, **kwargs: P.kwargs) -> R:
            async with self:
                return await fn(*args, **kwargs)

        return locked

    def __repr__(self) -> str:
        return f"<AsyncLock {self.name!r} term={self.term!r}>"
