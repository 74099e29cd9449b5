"""Waking waiters: a coroutine's loop that closed before the news came is not an error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from django_simba.engine.runtime import Outcome
from django_simba.engine.waiters import LoopWaiter, on_lane, session_live
from django_simba.spi import BackendUnavailable


class HeldPort:
    """Keeps the callback of the one call submitted, to answer it later."""

    def __init__(self) -> None:
        self.done: Callable[[Outcome[Any]], None] | None = None

    def submit(self, call: Callable[[], Any], done: Callable[[Outcome[Any]], None]) -> None:
        self.done = done


def test_waking_a_waiter_whose_loop_closed_does_nothing() -> None:
    loop = asyncio.new_event_loop()
    waiter = LoopWaiter(loop)
    loop.close()
    waiter.wake()  # from the engine's thread, mutex held: must neither raise nor block


def test_an_answer_for_a_loop_that_closed_meanwhile_is_dropped() -> None:
    port = HeldPort()
    loop = asyncio.new_event_loop()

    async def ask() -> None:
        on_lane(port, lambda: 1)  # type: ignore[arg-type]

    loop.run_until_complete(ask())
    loop.close()
    assert port.done is not None
    port.done(Outcome(value=1))  # on the lane's thread: the loop is gone, nothing raises


def test_a_failed_call_raises_its_error_in_the_awaiting_coroutine() -> None:
    port = HeldPort()

    async def ask() -> None:
        future = on_lane(port, lambda: 1)  # type: ignore[arg-type]
        assert port.done is not None
        port.done(Outcome(error=ValueError("refused")))
        with pytest.raises(ValueError, match="refused"):
            await asyncio.wait_for(future, 1)

    asyncio.run(ask())


class SessionPort:
    """No session yet: keeps who waits for one, and who gave up waiting."""

    session_id = None

    def __init__(self) -> None:
        self.waiting: list[Callable[[str | None], None]] = []
        self.forgotten: list[Callable[[str | None], None]] = []

    def when_session(self, callback: Callable[[str | None], None]) -> None:
        self.waiting.append(callback)

    def forget_session_waiter(self, callback: Callable[[str | None], None]) -> None:
        self.forgotten.append(callback)

    def no_session(self) -> BackendUnavailable:
        return BackendUnavailable("no session")


def test_waiting_for_a_session_gives_up_at_its_timeout_and_forgets_its_callback() -> None:
    port = SessionPort()
    loop = asyncio.new_event_loop()

    async def wait() -> None:
        with pytest.raises(BackendUnavailable, match="no session"):
            await asyncio.wait_for(session_live(port, 0.01), 1)  # type: ignore[arg-type]

    loop.run_until_complete(wait())
    loop.close()
    assert len(port.waiting) == 1 and port.forgotten == port.waiting
    port.waiting[0]("late")  # a session opened after the loop closed: nothing raises


def test_a_session_that_opens_while_waited_for_is_returned() -> None:
    port = SessionPort()

    async def wait() -> str:
        task = asyncio.ensure_future(session_live(port, 1))  # type: ignore[arg-type]
        await asyncio.sleep(0)
        port.waiting[0]("opened")
        return await task

    assert asyncio.run(wait()) == "opened"
