"""How long a backend call may wait for what the backend shares among its calls.

A call may wait for a connection of a pool or for a turn (SQLite lets one connection write
at a time) before it reaches the server. That wait is the caller's, not the backend's: the
engine says here when the thread's caller stops waiting (its lock's timeout), so a call
finding the pool saturated gives up then, not only at the backend's timeout. A call made
for no caller with a timeout (the engine's own, a bare SPI call) waits up to the backend's.
"""

from __future__ import annotations

import time
from contextvars import ContextVar

#: When the calling thread's caller stops waiting (``time.monotonic()``), or None: no limit but ours.
CALLER_DEADLINE: ContextVar[float | None] = ContextVar("simba_caller_deadline", default=None)


def patience(longest: float) -> float:
    """Seconds a call may wait for a connection or a turn: what its caller has left, at most ``longest``."""
    deadline = CALLER_DEADLINE.get()
    if deadline is None:
        return longest
    return max(0.0, min(longest, deadline - time.monotonic()))
