"""Helpers of the fencing tests: real ``Term`` objects a test ends by hand, and running a coroutine."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

from django_simba.engine import EndReason, Term

T = TypeVar("T")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def term(name: str, token: int, clock: Clock | None = None, lasts: float = 10.0) -> Term:
    """A term of ``name`` valid until ``lasts`` seconds on ``clock`` (a clock of its own by default)."""
    clock = clock or Clock()
    return Term(name, token, "test-session", clock.now + lasts, clock, os.getpid)


def end(held: Term) -> None:
    """End ``held`` as the engine does when a keep-alive reply no longer lists it."""
    held._end(EndReason.TAKEN)


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine``, then close the connections Django's database thread opened for it."""

    async def then_close() -> T:
        try:
            return await asyncio.wait_for(coroutine, 20)
        finally:
            await sync_to_async(connections.close_all)()

    return asyncio.run(then_close())
