"""One simulated process: a real :class:`Engine` on its own clock, its elections, and its writer.

The process's clock is its own monotonic clock: ``offset + world_time * rate``,
where ``rate`` differs from 1 by less than ``DRIFT`` (unless a premise says
otherwise). It keeps running while the process is paused. Every event of the
process (timers, replies, callbacks, notifications) waits while it is paused and
is dropped once it stopped (crashed or exited); the backend side of its calls runs
regardless. What the process does with its engine is in :mod:`.app`.

A process may fork a child without fork hooks (:meth:`SimProcess.fork`): the child
gets its own process id, the same clock, and a copy of the parent's memory (its
engine and workload, see :mod:`.fork`), but none of the engine's threads: its
timers, lanes and callbacks run nothing until the engine resets its runtime.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...engine import EndReason, Engine, EngineConfig, EngineObserver, Term, Timer
from ..runtime import Fate, VirtualRuntime
from .app import Application
from .backend import backend_class
from .fork import copy_of_memory
from .short_grants import session_lost

if TYPE_CHECKING:
    from .world import Event, World


#: Often enough that every run purges a few times.
PURGE_INTERVAL = 20.0


class _NoThread:
    """A timer no thread will ever run (the fork did not copy the thread)."""

    def cancel(self) -> None:
        pass


class WorldTimer:
    """A timer of the engine on the world's heap: cancelling it makes the world skip its event."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ProcessRuntime(VirtualRuntime):
    """The engine's runtime inside the world: the world's event heap, the process's clock."""

    def __init__(
        self, world: World, process: SimProcess, *, rate: float, offset: float, timeout: float, forked: bool
    ):
        super().__init__(seed=0, start=0.0, timeout=timeout)
        self._world = world
        self._process = process
        self.rate = rate
        self.offset = offset
        self._random = random.Random(f"{world.config.seed}:{process.label}:engine")
        self.process_id = process.pid
        # Never read earlier than the event being run was due (float rounding of world times).
        self.floor = 0.0
        #: False in a child forked without hooks, until the engine resets its runtime.
        self.threads = not forked
        self.running = forked  # the parent's runtime was running: the child's copy says so too

    def now(self) -> float:
        local = self.offset + self._world.now * self.rate
        return local if local > self.floor else self.floor

    def world_time(self, local: float) -> float:
        return (local - self.offset) / self.rate

    def at_local(self, when: float, fn: Callable[[], None], timer: WorldTimer | None = None) -> None:
        """Run ``fn`` in this process at local time ``when`` (on whichever thread asks)."""
        # world_time(when), inlined: the engine's and the workload's every timer comes here
        self._world.schedule((when - self.offset) / self.rate, fn, self._process, when, timer)

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer:
        # VirtualRuntime's with _at() and max() inlined: every timer of the engine comes here
        if not self.threads:
            return _NoThread()
        timer = WorldTimer()
        self.at_local(self.now() + (delay if delay > 0.0 else 0.0), fn, timer)
        return timer

    def _at(self, when: float, fn: Callable[[], None]) -> Timer:
        if not self.threads:
            return _NoThread()
        timer = WorldTimer()
        self.at_local(when, fn, timer)
        return timer

    def _run_at(self, when: float, fn: Callable[[], None]) -> None:
        # no timer for what nothing cancels (most of the runtime's events): an object fewer each
        if self.threads:
            self.at_local(when, fn)

    def _deliver(self, when: float, fn: Callable[[], None]) -> None:
        self._world.schedule(self.world_time(when), fn)

    def plan(self, lane: str) -> Fate:
        return self._world.network.plan(self._process)

    def after_fork(self) -> None:
        """The engine resets its runtime in a child: new threads, nothing queued for the old ones."""
        self.threads = True
        self.running = False
        self._lanes.clear()
        self._busy.clear()


class SimProcess:
    """A process of the simulated cluster, in process seat ``seat`` (a child shares its parent's)."""

    def __init__(
        self,
        world: World,
        seat: int,
        number: int,
        *,
        rate: float,
        patient: bool,
        parent: SimProcess | None = None,
    ) -> None:
        config = world.config
        self.world = world
        self.seat = seat
        self.label = f"P{number}"
        self.pid = world.new_pid()
        self.parent = parent
        self.stopped = False  # crashed or exited: runs nothing ever again
        self.paused = False
        self.held: list[Event] = []  # events that came due while paused
        if parent is None:
            timeout = config.patient_timeout if patient else config.timeout
            # local clocks share nothing with the world's
            offset = random.Random(f"{config.seed}:{self.label}:clock").uniform(0.0, 10_000.0)
        else:
            timeout, offset = parent.runtime.timeout, parent.runtime.offset  # the same host clock
        self.runtime: ProcessRuntime = ProcessRuntime(
            world, self, rate=rate, offset=offset, timeout=timeout, forked=parent is not None
        )
        self.backend = backend_class(world.hand_over)(world, self, timeout=timeout)
        self.engine: Engine
        self.app: Application
        if parent is None:
            self.engine = Engine(
                self.backend,
                EngineConfig(
                    lease_duration=config.lease,
                    renew_interval=config.renew,
                    drift=config.drift,
                    purge_interval=PURGE_INTERVAL,
                    metadata=self.label,
                ),
                self.runtime,
            )
            self.engine.observers.append(_Tracer(self))
            self.app = Application(self)
        else:
            self.app = copy_of_memory(
                parent.app,
                {parent: self, parent.runtime: self.runtime, parent.backend: self.backend, world: world},
            )
            self.engine = self.app.engine

    def start(self) -> None:
        self.app.start()

    def fork(self, number: int) -> SimProcess:
        """A child forked without hooks (uWSGI): a copy of this process's memory, no threads."""
        return SimProcess(self.world, self.seat, number, rate=self.runtime.rate, patient=False, parent=self)

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the process's own thread (its workload), after ``delay`` local seconds."""
        runtime = self.runtime
        runtime.at_local(runtime.now() + (delay if delay > 0.0 else 0.0), fn)  # max(0.0, delay), no call

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else "paused" if self.paused else "running"
        return f"<SimProcess {self.label} pid={self.pid} seat={self.seat} {state}>"


class _Tracer(EngineObserver):
    """Puts the engine's own view of events into the trace, and every term it grants to the oracle."""

    def __init__(self, process: SimProcess) -> None:
        self._process = process

    def _add(self, message: str, *args: object) -> None:
        world = self._process.world
        world.trace.add(world.now, self._process.label, message, *args)

    def session_opened(self, session_id: str) -> None:
        self._add("engine: session %s opened", session_id)
        self._process.app.join_group()

    def session_lost(self, session_id: str, reason: EndReason) -> None:
        self._add("engine: session %s lost (%s)", session_id, reason.value)
        session_lost(self._process, reason)

    def term_started(self, kind: str, term: Term) -> None:
        self._add("engine: %s term %s#%d started", kind, term.name, term.token)
        self._process.world.checker.term_granted(self._process, term)

    def term_ended(self, kind: str, term: Term, reason: EndReason) -> None:
        self._add("engine: term %s#%d ended (%s)", term.name, term.token, reason.value)
