"""One simulated process: a real :class:`Engine` on its own clock, its elections, and its writer.

The process's clock is its own monotonic clock: ``offset + world_time * rate``,
where ``rate`` differs from 1 by less than ``DRIFT`` (unless a premise says
otherwise). It keeps running while the process is paused. Every event of the
process (timers, replies, callbacks, notifications) waits while it is paused and
is dropped once it crashed; the backend side of its calls runs regardless. What
the process does with its engine is in :mod:`.app`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...engine import EndReason, Engine, EngineConfig, EngineObserver, Term, Timer
from ..runtime import Fate, VirtualRuntime
from .app import Application
from .backend import SimulatedBackend

if TYPE_CHECKING:
    from .world import World, WorldEvent


class ProcessRuntime(VirtualRuntime):
    """The engine's runtime inside the world: the world's event heap, the process's clock."""

    def __init__(self, world: World, process: SimProcess, *, rate: float, offset: float, timeout: float):
        super().__init__(seed=0, start=0.0, timeout=timeout)
        self._world = world
        self._process = process
        self.rate = rate
        self._offset = offset
        self._random = random.Random(f"{world.config.seed}:{process.label}:engine")
        # Never read earlier than the event being run was due (float rounding of world times).
        self.floor = 0.0

    def now(self) -> float:
        local = self._offset + self._world.now * self.rate
        return local if local > self.floor else self.floor

    def world_time(self, local: float) -> float:
        return (local - self._offset) / self.rate

    def _at(self, when: float, fn: Callable[[], None]) -> Timer:
        return self._world.schedule(self.world_time(when), fn, owner=self._process, local_due=when)

    def _deliver(self, when: float, fn: Callable[[], None]) -> None:
        self._world.schedule(self.world_time(when), fn)

    def plan(self, lane: str) -> Fate:
        return self._world.network.plan(self._process, lane)


class SimProcess:
    """A process of the simulated cluster, in process slot ``slot``."""

    def __init__(self, world: World, slot: int, number: int, *, rate: float, patient: bool) -> None:
        config = world.config
        self.world = world
        self.slot = slot
        self.label = f"P{number}"
        self.crashed = False
        self.paused = False
        self.held: list[WorldEvent] = []  # events that came due while paused
        timeout = config.patient_timeout if patient else config.timeout
        # local clocks share nothing with the world's
        offset = random.Random(f"{config.seed}:{self.label}:clock").uniform(0.0, 10_000.0)
        self.runtime = ProcessRuntime(world, self, rate=rate, offset=offset, timeout=timeout)
        self.backend = SimulatedBackend(world, self, timeout=timeout)
        self.engine = Engine(
            self.backend,
            EngineConfig(
                lease_duration=config.lease,
                renew_interval=config.renew,
                drift=config.drift,
                purge_interval=60.0,
                metadata=self.label,
            ),
            self.runtime,
        )
        self.engine.observers.append(_Tracer(self))
        self.app = Application(self)

    def start(self) -> None:
        self.app.start()

    def __repr__(self) -> str:
        state = "crashed" if self.crashed else "paused" if self.paused else "running"
        return f"<SimProcess {self.label} slot={self.slot} {state}>"


class _Tracer(EngineObserver):
    """Puts the engine's own view of events into the trace."""

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

    def term_started(self, kind: str, term: Term) -> None:
        self._add("engine: elected for %s, token %d", term.name, term.token)

    def term_ended(self, kind: str, term: Term, reason: EndReason) -> None:
        self._add("engine: term %s#%d ended (%s)", term.name, term.token, reason.value)
