"""The simulated network: what happens to each call, notification and write of a process.

While calm, every message takes up to ``max_delay`` one way. The active episodes
aimed at a process's slot make its messages get lost or arrive late. Every
effect is counted by kind, so a run reports what it actually injected.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..runtime import Fate
from .config import SimulationConfig
from .faults import Episode, FaultKind
from .trace import Trace

if TYPE_CHECKING:
    from .process import SimProcess

MIN_DELAY = 0.0005


class Network:
    """Draws the fate of every message from the seed and the active episodes."""

    def __init__(
        self,
        config: SimulationConfig,
        rng: random.Random,
        clock: Callable[[], float],
        faults: Counter[str],
        trace: Trace,
    ) -> None:
        self.config = config
        self._rng = rng
        self._clock = clock
        self._faults = faults
        self._trace = trace
        self._active: list[Episode] = []

    def begin(self, episode: Episode) -> None:
        self._active.append(episode)

    def end(self, episode: Episode) -> None:
        self._active.remove(episode)

    def _episode(self, kind: FaultKind, slot: int) -> Episode | None:
        for episode in self._active:
            if episode.kind is kind and episode.slot == slot:
                return episode
        return None

    def calm_delay(self) -> float:
        return self._rng.uniform(MIN_DELAY, self.config.max_delay)

    def plan(self, process: SimProcess, lane: str) -> Fate:
        """The fate of the next call ``process`` sends on ``lane``."""
        request, reply = self.calm_delay(), self.calm_delay()
        lossy = self._episode(FaultKind.LOSSY_NETWORK, process.slot)
        if lossy is not None:
            draw = self._rng.random()
            if draw < lossy.strength / 2:
                self._count(process, "lost request", lane)
                return Fate(request_delay=request, lose_request=True)
            if draw < lossy.strength:
                self._count(process, "lost reply", lane)
                return Fate(request_delay=request, lose_reply=True)
        slow = self._episode(FaultKind.SLOW_NETWORK, process.slot)
        if slow is not None and self._rng.random() < 0.6:
            late = slow.strength * process.runtime.timeout * self._rng.uniform(0.5, 1.0)
            if self._rng.random() < 0.5:
                request += late
            else:
                reply += late
            timeout = process.runtime.timeout
            if request > timeout:
                self._count(process, "request applied after the timeout", lane)
            elif request + reply > timeout:
                self._count(process, "reply past the timeout", lane)
            elif request + reply > self.config.renew:
                self._count(process, "reply later than the renew interval", lane)
        return Fate(request_delay=request, reply_delay=reply)

    def direct_fate(self, process: SimProcess) -> Fate:
        """The fate of a call made in the process's own thread (a lock's try-acquire or release,
        a group join): it takes no simulated time, but a lossy network still loses it."""
        lossy = self._episode(FaultKind.LOSSY_NETWORK, process.slot)
        if lossy is not None:
            draw = self._rng.random()
            if draw < lossy.strength / 2:
                self._count(process, "lost request", "direct")
                return Fate(lose_request=True)
            if draw < lossy.strength:
                self._count(process, "lost reply", "direct")
                return Fate(lose_reply=True)
        return Fate()

    def notification_delay(self, process: SimProcess) -> float | None:
        """How long a notification takes to reach ``process``; None when it is lost."""
        if self._episode(FaultKind.LOST_NOTIFICATIONS, process.slot) is not None:
            self._faults["lost notification"] += 1
            return None
        return self.calm_delay()

    def write_delay(self, process: SimProcess) -> float:
        """How long a write of ``process`` takes to reach the fenced register."""
        late = self._episode(FaultKind.LATE_WRITES, process.slot)
        if late is None:
            return self.calm_delay()
        self._faults["late write"] += 1
        return late.strength * self.config.lease * self._rng.uniform(0.5, 1.0)

    def _count(self, process: SimProcess, what: str, lane: str) -> None:
        self._faults[what] += 1
        self._trace.add(self._clock(), process.label, "%s call: %s", lane, what)
