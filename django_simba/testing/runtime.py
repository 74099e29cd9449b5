"""A deterministic runtime: virtual time, one thread, a pluggable network.

Timers, lane calls and callbacks become events on one heap ordered by
(virtual time, sequence). A lane runs one call at a time; each call's fate is
decided by :meth:`VirtualRuntime.plan`, which the simulation overrides to lose
requests or replies and to delay them, and by the call itself, which may raise
:class:`Unanswered` when it arrives. A call whose reply does not arrive within
the backend's timeout completes with :class:`BackendTimeout`, whether or not it
was applied.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..engine.runtime import Outcome, Timer
from ..spi import BackendTimeout

logger = logging.getLogger("django_simba.testing")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Fate:
    """What the network does to one call."""

    request_delay: float = 0.0
    reply_delay: float = 0.0
    lose_request: bool = False  # never applied
    lose_reply: bool = False  # applied, never answered


class Unanswered(Exception):
    """Raised by a lane call as it arrives: the network lost its request or its reply.

    The caller hears nothing and times out, as with a lost request or reply of :class:`Fate`;
    a simulated backend raises it to decide the fate of each operation where it is applied.
    """


class _Event:
    __slots__ = ("cancelled", "fn")

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class VirtualRuntime:
    """Implements the engine's ``Runtime`` protocol on a virtual clock."""

    def __init__(self, *, seed: int = 0, start: float = 1000.0, timeout: float = 5.0) -> None:
        self.clock = start
        self.timeout = timeout
        self._random = random.Random(seed)
        self._events: list[tuple[float, int, _Event]] = []
        self._sequence = itertools.count()
        self._lanes: dict[str, deque[Callable[[], None]]] = {}
        self._busy: set[str] = set()
        self.running = False
        self.callback_errors = 0
        #: The fate of the lane call being applied now (None outside one): what its backend reads.
        self.applying: Fate | None = None
        #: What :meth:`pid` returns: the identity of the process this runtime runs.
        self.process_id = 1

    # -- Runtime protocol ---------------------------------------------------------------

    def now(self) -> float:
        return self.clock

    @property
    def random(self) -> random.Random:
        return self._random

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer:
        return self._at(self.now() + max(0.0, delay), fn)

    def submit(self, lane: str, call: Callable[[], T], on_done: Callable[[Outcome[T]], None]) -> None:
        if not self.running:
            return
        self._lanes.setdefault(lane, deque()).append(lambda: self._send(lane, call, on_done))
        self._pump(lane)

    def run_callback(self, fn: Callable[[], None]) -> None:
        def run() -> None:
            try:
                fn()
            except Exception:
                self.callback_errors += 1
                logger.exception("callback raised")

        self._run_at(self.now(), run)

    def start(self) -> None:
        self.running = True

    def stop(self, timeout: float) -> None:
        self.running = False

    def after_fork(self) -> None:
        pass

    def pid(self) -> int:
        """The identity of the running process, as ``os.getpid()`` is for a real one."""
        return self.process_id

    # -- the network ----------------------------------------------------------------------

    def plan(self, lane: str) -> Fate:
        """The fate of the next call on ``lane``: override to inject faults."""
        return Fate()

    def _send(self, lane: str, call: Callable[[], T], on_done: Callable[[Outcome[T]], None]) -> None:
        fate = self.plan(lane)
        sent = self.now()
        answered_at = sent + fate.request_delay + fate.reply_delay
        answered = not (fate.lose_request or fate.lose_reply or answered_at - sent > self.timeout)

        def finish(outcome: Outcome[T]) -> None:
            self._busy.discard(lane)
            on_done(outcome)
            self._pump(lane)

        def timed_out() -> None:
            finish(Outcome(error=BackendTimeout(f"no reply within {self.timeout} s"), started=sent))

        def apply() -> None:
            self.applying = fate
            outcome: Outcome[T] | None
            try:
                outcome = Outcome(value=call(), started=sent)
            except Unanswered:
                outcome = None
            except Exception as error:
                outcome = Outcome(error=error, started=sent)
            finally:
                self.applying = None
            if not answered:
                return  # its timeout is on its way already
            if outcome is None:
                self._run_at(sent + self.timeout, timed_out)
            else:
                self._run_at(answered_at, lambda: finish(outcome))

        if not fate.lose_request:
            self._deliver(sent + fate.request_delay, apply)
        if not answered:
            self._run_at(sent + self.timeout, timed_out)

    def _pump(self, lane: str) -> None:
        queue = self._lanes.get(lane)
        if lane in self._busy or not queue:
            return
        self._busy.add(lane)
        job = queue.popleft()
        self._run_at(self.now(), job)

    # -- scheduling (the simulation overrides these to share one world clock) --------------

    def _at(self, when: float, fn: Callable[[], None]) -> Timer:
        """Run ``fn`` in this process at local time ``when``."""
        event = _Event(fn)
        heapq.heappush(self._events, (when, next(self._sequence), event))
        return event

    def _run_at(self, when: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` at local time ``when``: the runtime's own events, which nothing cancels."""
        self._at(when, fn)

    def _deliver(self, when: float, fn: Callable[[], None]) -> None:
        """Apply a request on the backend at local time ``when``: not this process's work, so
        a simulation runs it even while the process is paused or after it crashed."""
        self._at(when, fn)

    # -- driving ----------------------------------------------------------------------------

    def step(self) -> bool:
        """Run the next event; False when there is none."""
        while self._events:
            when, _, event = heapq.heappop(self._events)
            if event.cancelled:
                continue
            self.clock = max(self.clock, when)
            event.fn()
            return True
        return False

    def run_until(self, when: float, check: Callable[[], Any] | None = None) -> None:
        """Run every event due up to ``when`` (``check`` after each), then set the clock to it."""
        while self._events and self._events[0][0] <= when:
            if self.step() and check is not None:
                check()
        self.clock = max(self.clock, when)

    def advance(self, seconds: float, check: Callable[[], Any] | None = None) -> None:
        self.run_until(self.clock + seconds, check)

    def run_until_true(self, condition: Callable[[], bool], limit: float) -> float:
        """Run events until ``condition()`` holds; return the virtual time it took. Fails past ``limit``."""
        start = self.clock
        while not condition():
            if not self._events or self._events[0][0] > start + limit:
                raise AssertionError(f"condition not met within {limit} virtual seconds")
            self.step()
        return self.clock - start
