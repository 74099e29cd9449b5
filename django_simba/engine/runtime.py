"""Where the engine's time and threads come from.

The engine never calls ``time.time()``, ``time.sleep()`` or starts a
``threading.Timer`` itself: it asks a :class:`Runtime` for the time, for timers,
to run a blocking backend call on a lane, and to run a user callback. The
:class:`ThreadRuntime` does that with a few daemon threads; the simulation in
``django_simba.testing`` does it in one thread on a virtual clock.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import queue
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ..errors import EngineClosed
from ..spi.clock import local_clock

logger = logging.getLogger("django_simba.engine")

T = TypeVar("T")

#: Lanes: each runs its calls one at a time, in order.
SESSION_LANE = "session"  # open, keep-alive: never queued behind a slow acquire
CONTEND_LANE = "contend"  # acquire, release, join, leave, members, purge, close of a lost session


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """The result of a backend call run on a lane: a value, or the exception it raised."""

    value: T | None = None
    error: BaseException | None = None
    #: When the call left (the runtime's clock): a call may wait on its lane before it is sent.
    started: float | None = None

    def sent_at(self, queued_at: float) -> float:
        """When the request was sent: deadlines count from then, not from when it was queued."""
        return queued_at if self.started is None else self.started

    @property
    def ok(self) -> bool:
        return self.error is None


#: The outcome of a call that returned nothing and raised nothing (shared: outcomes are immutable).
DONE: Outcome[None] = Outcome()


class Timer(Protocol):
    def cancel(self) -> None: ...


class Runtime(Protocol):
    """Time, timers, lanes and the callback thread, as the engine sees them."""

    def now(self) -> float:
        """Seconds on a monotonic clock (in production one that counts suspended time)."""
        ...

    @property
    def random(self) -> random.Random:
        """Source of jitter (seeded in the simulation)."""
        ...

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer:
        """Run ``fn`` after ``delay`` seconds (on the timer thread)."""
        ...

    def submit(self, lane: str, call: Callable[[], T], on_done: Callable[[Outcome[T]], None]) -> None:
        """Run the blocking ``call`` on ``lane``, then ``on_done`` with its outcome."""
        ...

    def run_callback(self, fn: Callable[[], None]) -> None:
        """Run a user callback on the single callback thread; an exception is logged."""
        ...

    def pid(self) -> int:
        """This process's id: a change tells the engine it runs in a forked child."""
        ...

    def start(self) -> None: ...

    def stop(self, timeout: float) -> None: ...

    def after_fork(self) -> None:
        """In a forked child: forget the parent's threads (they do not exist here)."""
        ...


class _TimerHandle:
    __slots__ = ("cancelled", "due", "fn")

    def __init__(self, due: float, fn: Callable[[], None]) -> None:
        self.due = due
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


_STOP = object()
#: The timer heap is cleared of cancelled entries when it grows past this, then past twice its live size.
COMPACT_MIN = 1024


class _Lane:
    """A daemon thread running queued jobs one at a time."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=f"simba-{name}", daemon=True)

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            if job is _STOP:
                return
            try:
                job()
            except Exception:  # a job never kills its lane
                logger.exception("django-simba: unexpected error on the %s thread", self.name)


class ThreadRuntime:
    """The production runtime: a timer thread, one thread per lane, one callback thread.

    No thread exists until :meth:`start` (never at import time).
    """

    #: The clock itself, not a method calling it: read several times a lock cycle.
    now: Callable[[], float]
    #: ``os.getpid`` itself, for the same reason.
    pid = staticmethod(os.getpid)

    def __init__(self, clock: Callable[[], float] = local_clock, rng: random.Random | None = None):
        self._clock = self.now = clock
        self._random = rng or random.Random()
        self._init_state()

    def _init_state(self) -> None:
        self._mutex = threading.Lock()
        self._wakeup = threading.Condition(self._mutex)
        self._timers: list[tuple[float, int, _TimerHandle]] = []
        self._compact_at = COMPACT_MIN
        self._sequence = itertools.count()
        self._lanes: dict[str, _Lane] = {}
        self._timer_thread: threading.Thread | None = None
        self._running = False

    @property
    def random(self) -> random.Random:
        return self._random

    def start(self) -> None:
        with self._mutex:
            if self._running:
                return
            self._running = True
            self._timer_thread = threading.Thread(target=self._run_timers, name="simba-timer", daemon=True)
            self._timer_thread.start()

    def stop(self, timeout: float) -> None:
        with self._mutex:
            if not self._running:
                return
            self._running = False
            self._timers.clear()
            self._wakeup.notify_all()
            lanes, self._lanes = list(self._lanes.values()), {}
            timer_thread = self._timer_thread
        for lane in lanes:
            lane.jobs.put(_STOP)
        current = threading.current_thread()
        for thread in [lane.thread for lane in lanes] + [timer_thread]:
            if thread is not None and thread is not current and thread.is_alive():
                thread.join(timeout)

    def after_fork(self) -> None:
        self._init_state()

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer:
        handle = _TimerHandle(self._clock() + max(0.0, delay), fn)
        with self._mutex:
            if self._running:
                heapq.heappush(self._timers, (handle.due, next(self._sequence), handle))
                if len(self._timers) > self._compact_at:
                    self._compact()
                # Waking the timer thread costs a context switch: only when it must sleep less.
                if self._timers[0][2] is handle:
                    self._wakeup.notify()
        return handle

    def _compact(self) -> None:
        """Drop cancelled timers (mutex held): a lock taken and released in a loop cancels one per term."""
        self._timers = [entry for entry in self._timers if not entry[2].cancelled]
        heapq.heapify(self._timers)
        self._compact_at = max(COMPACT_MIN, 2 * len(self._timers))

    def _lane(self, name: str) -> _Lane | None:
        with self._mutex:
            if not self._running:
                return None
            lane = self._lanes.get(name)
            if lane is None:
                lane = self._lanes[name] = _Lane(name)
                lane.thread.start()
            return lane

    def submit(self, lane: str, call: Callable[[], T], on_done: Callable[[Outcome[T]], None]) -> None:
        worker = self._lane(lane)
        if worker is None:  # stopped: say so, rather than leave a caller waiting for ever
            on_done(Outcome(error=EngineClosed("the engine's threads are stopped")))
            return

        def job() -> None:
            started = self._clock()
            try:
                outcome: Outcome[T] = Outcome(value=call(), started=started)
            except Exception as error:
                outcome = Outcome(error=error, started=started)
            on_done(outcome)

        worker.jobs.put(job)

    def run_callback(self, fn: Callable[[], None]) -> None:
        worker = self._lane("callbacks")
        if worker is None:
            _run_logged(fn)
            return
        worker.jobs.put(lambda: _run_logged(fn))

    def _run_timers(self) -> None:
        while True:
            with self._mutex:
                while self._running and (not self._timers or self._timers[0][0] > self._clock()):
                    timeout = self._timers[0][0] - self._clock() if self._timers else None
                    self._wakeup.wait(timeout)
                if not self._running:
                    return
                _, _, handle = heapq.heappop(self._timers)
            if not handle.cancelled:
                try:
                    handle.fn()
                except Exception:
                    logger.exception("django-simba: unexpected error in a timer")


def _run_logged(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:
        logger.exception("django-simba: a callback raised; the engine goes on")
