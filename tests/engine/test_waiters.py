"""Waking waiters: a coroutine's loop that closed before the news came is not an error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from django_simba.engine.runtime import Outcome
from django_simba.engine.waiters import LoopWaiter, on_lane


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
