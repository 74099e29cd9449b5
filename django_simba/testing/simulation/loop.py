"""An asyncio event loop inside the simulated world: a process's tasks on its own clock.

The engine's coroutine code (``AsyncLock``: its waiter, its attempts on the engine's lane,
its timeouts) runs unchanged on :class:`SimLoop`. The loop keeps asyncio's own queues;
its ``time()`` is the process's local clock, and whatever it has to run (a callback made
ready, a timer coming due) becomes an event of that process on the world's heap, so it
waits while the process is paused, is dropped once the process stopped, and replays
exactly from the seed. Nothing here blocks: a waiting task is a future, as on a real loop.

A forked child's copy of the loop is a :class:`GoneLoop`: the parent's tasks do not run in
the child (the thread that ran them did not survive the fork); the child runs a loop of its own.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
from asyncio import events
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVarTuple

if TYPE_CHECKING:
    from .process import SimProcess

Ts = TypeVarTuple("Ts")

#: Ready callbacks one pump runs at most before it yields to the world (a loop that never
#: settles would otherwise stop the world's clock).
MAX_CALLBACKS_PER_PUMP = 10_000


class SimLoop(asyncio.BaseEventLoop):
    """asyncio's base loop, driven by the world: no selector, no thread, virtual time."""

    def __init__(self, process: SimProcess) -> None:
        super().__init__()
        self._process = process
        self._clock_resolution = 1e-9
        self._pumps: set[float] = set()  # local times of the pumps on the world's heap
        self._pumping = False

    def time(self) -> float:
        return self._process.runtime.now()

    # -- what asyncio calls -----------------------------------------------------------

    def _call_soon(self, callback: Callable[..., Any], args: Any, context: Any) -> Any:
        handle = super()._call_soon(callback, args, context)  # type: ignore[misc]
        if not self._pumping:
            self._pump_at(self.time())
        return handle

    def call_at(
        self,
        when: float,
        callback: Callable[[*Ts], object],
        *args: *Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        timer = super().call_at(when, callback, *args, context=context)
        self._pump_at(when)
        return timer

    def _write_to_self(self) -> None:
        pass  # call_soon_threadsafe: the world runs in one thread, the pump is already scheduled

    def _process_events(self, event_list: Any) -> None:
        pass

    # -- the world drives it ------------------------------------------------------------

    def _pump_at(self, when: float) -> None:
        if any(due <= when for due in self._pumps):
            return  # an earlier pump is coming: it runs this, or asks for a pump that will
        self._pumps.add(when)
        self._process.runtime.at_local(when, lambda: self._pump(when))

    def _pump(self, due: float) -> None:
        """Run every callback ready and every timer due, then ask for the next pump."""
        self._pumps.discard(due)
        if self.is_closed():
            return
        ran = 0
        self._pumping = True
        events._set_running_loop(self)
        try:
            while ran < MAX_CALLBACKS_PER_PUMP:
                self._move_due_timers()
                if not self._ready:  # type: ignore[attr-defined]
                    break
                for _ in range(len(self._ready)):  # type: ignore[attr-defined]
                    handle = self._ready.popleft()  # type: ignore[attr-defined]
                    if not handle._cancelled:
                        handle._run()
                    ran += 1
        finally:
            events._set_running_loop(None)
            self._pumping = False
        if self._ready:  # type: ignore[attr-defined]
            self._pump_at(self.time())
        scheduled = self._scheduled  # type: ignore[attr-defined]
        while scheduled and scheduled[0]._cancelled:
            heapq.heappop(scheduled)._scheduled = False
        if scheduled:
            self._pump_at(scheduled[0]._when)

    def _move_due_timers(self) -> None:
        scheduled, now = self._scheduled, self.time()  # type: ignore[attr-defined]
        while scheduled and (scheduled[0]._cancelled or scheduled[0]._when <= now):
            timer = heapq.heappop(scheduled)
            timer._scheduled = False
            if not timer._cancelled:
                self._ready.append(timer)  # type: ignore[attr-defined]

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        pass  # a task of a crashed process is left pending; the callers report their own errors

    def __deepcopy__(self, memo: dict[int, Any]) -> GoneLoop:
        return GoneLoop()


class GoneLoop:
    """A forked child's copy of its parent's loop: whatever wakes a task of it wakes nothing."""

    def call_soon_threadsafe(self, callback: Callable[..., Any], *args: Any, context: Any = None) -> None:
        pass

    def is_closed(self) -> bool:
        return True
