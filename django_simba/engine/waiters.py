"""How a contender that waits is woken: a thread on an event, a coroutine on its own loop.

The engine wakes a waiter with its mutex held, from whatever thread the news arrived on
(a lane's reply, a notification, a timer): :meth:`wake` never blocks. A coroutine's waiter
is woken through ``call_soon_threadsafe`` on the loop it waits on, so a waiting coroutine
holds no thread at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from ..errors import EngineClosed

if TYPE_CHECKING:
    from .port import Port
    from .runtime import Outcome

T = TypeVar("T")


class Waiter(Protocol):
    #: Makes the attempts the engine hands it in its own thread (a blocked thread does; a loop must not).
    attempts_here: bool

    def wake(self) -> None:
        """Something changed for the waiter (mutex held; never blocks)."""
        ...


class ThreadWaiter:
    """A thread blocked on an event."""

    attempts_here = True

    def __init__(self) -> None:
        self._event = threading.Event()

    def wake(self) -> None:
        self._event.set()

    def wait(self, timeout: float | None) -> None:
        # Past TIMEOUT_MAX (49 days on Windows) the wait would raise: the caller's loop waits again.
        self._event.wait(timeout if timeout is None else min(timeout, threading.TIMEOUT_MAX))

    def clear(self) -> None:
        self._event.clear()


class LoopWaiter:
    """A coroutine awaiting on its event loop."""

    attempts_here = False

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._event = asyncio.Event()

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            self._loop.call_soon_threadsafe(self._event.set)

    async def wait(self) -> None:
        await self._event.wait()
        self._event.clear()


def on_lane(port: Port, call: Callable[[], T]) -> asyncio.Future[T]:
    """Run a blocking engine call on the engine's contend lane; a future on the running loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def done(outcome: Outcome[T]) -> None:
        try:  # noqa: SIM105 - every async acquire and release comes here: no suppress() object
            loop.call_soon_threadsafe(_settle, future, outcome)
        except RuntimeError:  # the loop closed meanwhile
            pass

    port.submit(call, done)
    return future


def _settle(future: asyncio.Future[T], outcome: Outcome[T]) -> None:
    if future.done():
        return
    if outcome.error is not None:
        future.set_exception(outcome.error)
    else:
        future.set_result(outcome.value)  # type: ignore[arg-type]


async def session_live(port: Port, timeout: float | None) -> str:
    """The live session's id, awaited without a thread; BackendUnavailable after ``timeout``."""
    session_id = port.session_id
    if session_id is not None:
        return session_id
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] = loop.create_future()

    def ready(session_id: str | None) -> None:
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_set_unless_done, future, session_id)

    port.when_session(ready)
    try:
        found = await asyncio.wait_for(future, timeout)
    except TimeoutError:
        raise port.no_session() from None
    finally:
        port.forget_session_waiter(ready)
    if found is None:
        raise EngineClosed("this engine was closed")
    return found


def _set_unless_done(future: asyncio.Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)
