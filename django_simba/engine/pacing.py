"""When a name is tried again: polling backoff, waits for a release, and courtesy to others.

Pure timing policy over a :class:`Slot`; the lines of names decide *what* to try.
"""

from __future__ import annotations

from ..spi import LeaseBackend
from .config import EngineConfig
from .runtime import Runtime
from .slot import Slot

#: After releasing a name other processes want, this process waits before taking it again, so the
#: one a release notification woke (or a poll finds it free) gets it: (acquire round trips, margin
#: in seconds), capped at a tenth of the renew interval. A notified waiter wakes within about a
#: round trip, and a longer pause leaves the name idle; a polling one comes when its backoff says.
NOTIFIED_COURTESY = (2, 0.0003)
POLLED_COURTESY = (3, 0.001)
COURTESY_CAP = 0.1
#: A name we learnt others want (they hold it, or were refused it) stays wanted this long, in renew intervals.
CONTENDED_FOR = 1.0


class Pacing:
    """Delays for one engine's retries (every method: mutex held)."""

    def __init__(self, backend: LeaseBackend, config: EngineConfig, runtime: Runtime) -> None:
        self.backend = backend
        self.config = config
        self.runtime = runtime
        self._acquire_round_trip: float | None = None  # moving average of acquire calls, seconds

    def measure_acquire(self, seconds: float) -> None:
        average = self._acquire_round_trip
        self._acquire_round_trip = seconds if average is None else 0.8 * average + 0.2 * seconds

    def contended(self, slot: Slot, now: float) -> bool:
        """Whether another process wanted the name lately."""
        return now - slot.wanted_at <= CONTENDED_FOR * self.config.renew_interval

    def offer_to_others(self, slot: Slot, now: float) -> None:
        """After our release: if other processes want the name, let them have it first.

        Without this, a process that releases and at once acquires again wins nearly every
        time: its attempt leaves before a remote waiter has even heard of the release.
        """
        if self.backend.hands_over:
            return  # the release gave the name to the first waiting session already, if any
        if slot.waiting or not self.contended(slot, now):
            return
        round_trip = self._acquire_round_trip or 0.0
        round_trips, margin = NOTIFIED_COURTESY if self.backend.notifying else POLLED_COURTESY
        delay = round_trips * round_trip + margin
        slot.courtesy_until = now + min(delay, COURTESY_CAP * self.config.renew_interval)

    def retry_delay(self, slot: Slot) -> float:
        """After a refusal: notified backends wait for the release, polled ones back off."""
        if self.backend.notifying:
            half = self.config.renew_interval / 2
            return half + self.runtime.random.uniform(0, half / 2)
        return self.poll_delay(slot)

    def poll_delay(self, slot: Slot) -> float:
        delay = slot.backoff * self.runtime.random.uniform(0.5, 1.0)
        slot.backoff = min(slot.backoff * 2, self.config.renew_interval / 2)
        return delay
