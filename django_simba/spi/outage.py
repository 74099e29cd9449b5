"""A backend outage told in a few log lines, not one per failed call.

While the backend is down, an idle engine still fails a call every second or
so (keep-alives, then session opens, then its candidates' acquires); logged
one by one, that was about fifty warnings in half a minute. :class:`Outage`
decides what is worth a line: the first failure, a reminder with the count
every ``remind_every`` seconds while it lasts, and the first success after it,
with the count and the duration.

``Outage`` is pure: it logs nothing and reads time only from the injected clock;
the caller logs the lines it returns. Not thread-safe: the engine calls it under
its mutex. :class:`ConnectionOutage` logs them itself, for a connection that one thread
owns (the Redis pub/sub connection, the PostgreSQL LISTEN connection): their
reconnection attempts are told the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from .durations import format_duration

#: While an outage lasts, a reminder line this often (seconds).
REMIND_EVERY = 300.0


class Outage:
    """Counts failed backend calls between the first failure and the next success."""

    def __init__(
        self,
        clock: Callable[[], float],
        backend: str = "the backend",
        *,
        remind_every: float = REMIND_EVERY,
        stragglers_for: float = 0.0,
        call: str = "call",
    ) -> None:
        self._clock = clock
        self.backend = backend
        self.remind_every = remind_every
        #: What failed, as the lines count it ("call", "attempt").
        self.call = call
        #: After an outage ends, a failure this soon is a call sent during it that failed late: no new
        #: outage (it said "answers again after 0.0 s (1 failed call)" right after the real one).
        self.stragglers_for = stragglers_for
        self._ended_at = float("-inf")
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
        if self._since is None and now - self._ended_at < self.stragglers_for:
            return None
        self._failures += 1
        self._last = what
        if self._since is None:
            self._since = self._reminded_at = now
            return f"{what} (further failures are counted until {self.backend} answers again)"
        if now - self._reminded_at >= self.remind_every:
            self._reminded_at = now
            lasted = now - self._since
            failures = self._count(self._failures)
            return f"{self.backend} still fails after {lasted:.0f} s, {failures}; the last: {what}"
        return None

    def succeeded(self) -> str | None:
        """A call succeeded: the line that ends an outage, or None when there was none."""
        if self._since is None:
            return None
        self._ended_at = self._clock()
        duration = self._ended_at - self._since
        failures, last = self._failures, self._last
        self._since, self._failures, self._last = None, 0, ""
        calls = self._count(failures)
        return f"{self.backend} answers again after {format_duration(duration)} ({calls}; the last: {last})"

    def _count(self, failures: int) -> str:
        return f"{failures} failed {self.call}{'s' * (failures != 1)}"


class ConnectionOutage:
    """The outage of a connection one thread owns, logged to ``logger`` as the engine logs its own.

    The first failure and the reminders go out at WARNING, each later failure at DEBUG; the first
    success after them says how long it lasted and how many attempts failed.
    """

    def __init__(
        self,
        logger: logging.Logger,
        connection: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        remind_every: float = REMIND_EVERY,
    ) -> None:
        self._logger = logger
        self._outage = Outage(clock, connection, remind_every=remind_every, call="attempt")

    @property
    def down(self) -> bool:
        return self._outage.down

    def failed(self, what: str) -> None:
        """An attempt failed (``what`` says which and why, credentials masked)."""
        line = self._outage.failed(what)
        if line is None:
            self._logger.debug("django-simba: %s", what)
        else:
            self._logger.warning("django-simba: %s", line)

    def succeeded(self) -> None:
        line = self._outage.succeeded()
        if line is not None:
            self._logger.warning("django-simba: %s", line)
