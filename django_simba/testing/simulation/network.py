"""The simulated network: what happens to each call, notification and write of a process.

While calm, every message takes up to ``max_delay`` one way. The active episodes
aimed at a process's seat make its messages get lost or arrive late. Every
effect is counted by kind, and each call's by the operation it hit, so a run
reports what it actually injected.

A call's delays are drawn when it is sent; whether its request or its reply is
lost is drawn where it arrives, once the operation is known (see ``backend.py``).
A call made in the process's own thread (a lock's first try and its release, a
group join, a close) takes no simulated time, so it is lost or applied late but
never merely slow.
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

# What a call can suffer, as counted.
LOST_REQUEST = "lost request"  # never applied
LOST_REPLY = "lost reply"  # applied, never answered
RESET_BEFORE = "reset before it was applied"  # fails at once (a connection reset), never applied
RESET_AFTER = "reset after it was applied"  # applied, then fails at once
APPLIED_LATE = "request applied after the timeout"  # the caller gave up before it was applied
ANSWERED_LATE = "reply past the timeout"  # applied in time, answered after the caller gave up
SLOW_REPLY = "reply later than the renew interval"  # answered in time, but slowly
REFUSED = "refused while the backend restarts"
CALL_EFFECTS = (
    LOST_REQUEST,
    LOST_REPLY,
    RESET_BEFORE,
    RESET_AFTER,
    APPLIED_LATE,
    ANSWERED_LATE,
    SLOW_REPLY,
    REFUSED,
)
#: Of the calls a lossy network breaks, the share that fail at once rather than time out.
RESET_SHARE = 0.5

#: The share of a process's direct calls a slow network applies after their timeout.
DIRECT_LATE_SHARE = 0.3


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
        #: (operation, effect) -> how many calls it hit
        self.call_faults: Counter[tuple[str, str]] = Counter()

    def begin(self, episode: Episode) -> None:
        self._active.append(episode)

    def end(self, episode: Episode) -> None:
        self._active.remove(episode)

    def _episode(self, kind: FaultKind, seat: int) -> Episode | None:
        for episode in self._active:
            if episode.kind is kind and episode.seat == seat:
                return episode
        return None

    def calm_delay(self) -> float:
        return self._rng.uniform(MIN_DELAY, self.config.max_delay)

    def plan(self, process: SimProcess) -> Fate:
        """The delays of the next call ``process`` sends on a lane (a slow network stretches one)."""
        request, reply = self.calm_delay(), self.calm_delay()
        slow = self._episode(FaultKind.SLOW_NETWORK, process.seat)
        if slow is not None and self._rng.random() < 0.6:
            late = slow.strength * process.runtime.timeout * self._rng.uniform(0.5, 1.0)
            if self._rng.random() < 0.5:
                request += late
            else:
                reply += late
        return Fate(request_delay=request, reply_delay=reply)

    def loss(self, process: SimProcess) -> str | None:
        """What a lossy network does to the call arriving now: loses or resets its request or reply."""
        lossy = self._episode(FaultKind.LOSSY_NETWORK, process.seat)
        if lossy is None:
            return None
        draw = self._rng.random()
        if draw >= lossy.strength:
            return None
        reset = self._rng.random() < RESET_SHARE
        if draw < lossy.strength / 2:
            return RESET_BEFORE if reset else LOST_REQUEST
        return RESET_AFTER if reset else LOST_REPLY

    def direct_delay(self, process: SimProcess) -> float:
        """How much later than its timeout a direct call is applied (0: at once, when made)."""
        slow = self._episode(FaultKind.SLOW_NETWORK, process.seat)
        if slow is None or self._rng.random() >= DIRECT_LATE_SHARE:
            return 0.0
        return process.runtime.timeout * (1.0 + slow.strength * self._rng.uniform(0.0, 1.0))

    def count(
        self, process: SimProcess, operation: str, effect: str, via: str, *, traced: bool = True
    ) -> None:
        """Note that ``effect`` hit a call of ``operation`` (made ``via`` a lane or directly)."""
        self._faults[effect] += 1
        self.call_faults[(operation, effect)] += 1
        if traced:
            self._trace.add(self._clock(), process.label, "%s %s: %s", via, operation, effect)

    def notification_delay(self, process: SimProcess) -> float | None:
        """How long a notification takes to reach ``process``; None when it is lost."""
        if self._episode(FaultKind.LOST_NOTIFICATIONS, process.seat) is not None:
            self._faults["lost notification"] += 1
            return None
        return self.calm_delay()

    def write_delay(self, process: SimProcess) -> float:
        """How long a write of ``process`` takes to reach the fenced register."""
        late = self._episode(FaultKind.LATE_WRITES, process.seat)
        if late is None:
            return self.calm_delay()
        self._faults["late write"] += 1
        return late.strength * self.config.lease * self._rng.uniform(0.5, 1.0)
