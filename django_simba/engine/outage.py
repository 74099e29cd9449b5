"""A backend outage told in a few log lines, not one per failed call.

While the backend is down, an idle engine still fails a call every second or
so (keep-alives, then session opens, then its candidates' acquires); logged
one by one, that was about fifty warnings in half a minute. :class:`Outage`
decides what is worth a line: the first failure, a reminder with the count
every ``remind_every`` seconds while it lasts, and the first success after it,
with the count and the duration.

Pure: it logs nothing and reads time only from the injected clock; the caller
logs the lines it returns. Not thread-safe: the engine calls it under its mutex.
"""

from __future__ import annotations

from collections.abc import Callable

#: While an outage lasts, a reminder line this often (seconds).
REMIND_EVERY = 300.0


class Outage:
    """Counts failed backend calls between the first failure and the next success."""

    def __init__(
        self, clock: Callable[[], float], backend: str = "the backend", *, remind_every: float = REMIND_EVERY
    ) -> None:
        self._clock = clock
        self.backend = backend
        self.remind_every = remind_every
        self._since: float | None = None
        self._reminded_at = 0.0
        self._failures = 0
        self._last = ""

    @property
    def down(self) -> bool:
        """True from a failure until the next success."""
        return self._since is not None

    @property
    def failures(self) -> int:
        """Calls failed in the current outage (0 when there is none)."""
        return self._failures

    def failed(self, what: str) -> str | None:
        """A call failed (``what`` says which and why): the line to log, or None to stay quiet."""
        now = self._clock()
        self._failures += 1
        self._last = what
        if self._since is None:
            self._since = self._reminded_at = now
            return f"{what} (further failures are counted until {self.backend} answers again)"
        if now - self._reminded_at >= self.remind_every:
            self._reminded_at = now
            lasted = now - self._since
            return f"still failing after {lasted:.0f} s, {self._failures} failed calls; the last: {what}"
        return None

    def succeeded(self) -> str | None:
        """A call succeeded: the line that ends an outage, or None when there was none."""
        if self._since is None:
            return None
        duration = self._clock() - self._since
        failures, last = self._failures, self._last
        self._since, self._failures, self._last = None, 0, ""
        calls = f"{failures} failed call{'s' * (failures != 1)}"
        return f"{self.backend} answers again after {duration:.1f} s ({calls}; the last: {last})"
