"""The lock for coroutines: a waiting coroutine is a contender of the engine, and holds no thread.

The engine grants an :class:`AsyncLock`'s request the way it grants a thread's: the grant
wakes the coroutine on its own event loop. Attempts and releases run on the engine's
contend lane, never on the loop's thread nor an executor's. A cancelled waiter leaves the
line at once (a grant that raced with the cancellation is released, never kept); while it
waits, it keeps its place in the backend's line.

Not re-entrant: a task that acquires a lock it already holds gets :class:`LockHeld`.
Tasks may share one ``AsyncLock``: each holds and releases its own term (the holdings are
per task, :mod:`.holdings`), waits in the engine's line with its own timeout, and every
acquisition gets a term with a new token. A task's exit never releases another task's term.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from types import EllipsisType, TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ..errors import LeaseLost, LockTimeout
from .lock import Acquisition, LockBase, hopeless
from .term import Term
from .waiters import LoopWaiter, on_lane, session_live

if TYPE_CHECKING:
    from .port import Port

P = ParamSpec("P")
R = TypeVar("R")

logger = logging.getLogger("django_simba.engine")


class LoopAcquirer(LockBase):
    """Acquiring from coroutines: a waiting task holds no thread; ``async with``, a decorator."""

    async def acquire(self, timeout: float | EllipsisType | None = ...) -> Term:
        """Wait up to ``timeout`` seconds (``None``: forever; 0: one try); else :class:`LockTimeout`."""
        timeout = self._timeout_for(timeout)
        port = self.port
        task = self._caller()
        self._refuse_reentry(port, task, "task")
        started = port.now()
        # Its waiter is made only once it has to wait: a grant of the first attempt wakes nobody.
        request = self._request(port, waits=timeout != 0)
        try:
            error = await self._first_attempt(port, request, timeout)
            if timeout != 0 and not hopeless(error):
                await self._wait(port, request, started, timeout)
        except BaseException:
            self._abandon(port, request)  # cancelled, or the engine failed: never keep a late grant
            raise
        term = self._outcome(port, request, error, timeout)
        self._keep(port, task, request)
        return term

    async def _first_attempt(
        self, port: Port, request: Acquisition, timeout: float | None
    ) -> BaseException | None:
        """The attempts a thread would make in its own thread, made on the engine's lane."""
        await session_live(port, self._session_wait(port, timeout))
        return await on_lane(port, lambda: self._first_attempts(port, request, 0))

    async def _wait(self, port: Port, request: Acquisition, started: float, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        with port.mutex:
            if request.settled:
                return
            waiter = request.waiter = LoopWaiter(loop)
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

    async def try_acquire(self) -> Term | None:
        """One attempt: the term, or ``None`` when it is held elsewhere."""
        try:
            return await self.acquire(0)
        except LockTimeout:
            return None

    @staticmethod
    def _caller() -> object:
        try:
            return asyncio.current_task()
        except RuntimeError:  # no loop runs here (a repr, a sync caller): no task holds anything
            return None

    async def release(self, term: Term | None = None) -> None:
        """Give back the term this task holds, or the one ``term`` is (from any task).

        The backend call finishes even if this task is cancelled. Raises like
        :meth:`Lock.release <.lock.ThreadAcquirer.release>`: :class:`LeaseNotHeld`, or
        :class:`LeaseLost` when that term had already ended; another task's term is never touched.
        """
        holder, held = self._unhold(self._caller(), term)
        port = self.port
        reason = await asyncio.shield(on_lane(port, lambda: port.release_now(holder, held)))
        self._released(held, reason)

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
        """Use as a decorator on a coroutine function: every call runs while holding it."""

        @functools.wraps(fn)
        async def locked(*args: P.args, **kwargs: P.kwargs) -> R:
            async with self:
                return await fn(*args, **kwargs)

        return locked


class AsyncLock(LoopAcquirer):
    """An exclusive lock on ``name`` for coroutines (see the module docstring).

    ``term`` and ``locked()`` are the calling task's; ``terms`` lists every task's.
    """

    def __repr__(self) -> str:
        return f"<AsyncLock {self.name!r} term={self.term!r}>"
