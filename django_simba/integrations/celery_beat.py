"""One Celery beat for a cluster of hosts: every host runs ``celery beat``, the elected one schedules.

::

    celery -A proj beat --scheduler django_simba.integrations.celery_beat:LeaderScheduler

:class:`LeaderScheduler` is Celery's default scheduler (``PersistentScheduler``)
that contends for the election ``celery.beat`` (``beat_simba_election`` in the
Celery configuration names another) and sends a due task only while it leads:
another host's beat waits, and takes over within ``LEASE_DURATION`` plus half a
renew interval (plus jitter) when the leader dies, at once when it stops. A due
entry that comes round while this beat does not lead is skipped here, as it is
being sent by the leader. Each task it sends carries the term in its headers
(``simba_lease``, ``simba_token``): pass the token to what the task writes to fence
it (a task from an old leader's term is then refused). For another scheduler (say
django-celery-beat's ``DatabaseScheduler``), mix :class:`LeaderOnly` in before it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.beat import PersistentScheduler, ScheduleEntry

from ..engine import Election, Term

logger = logging.getLogger("django_simba")

#: The election every beat of the cluster contends for, unless ``beat_simba_election`` names another.
DEFAULT_ELECTION = "celery.beat"
#: How long a beat that does not lead waits before it looks again (it wakes at once when elected).
IDLE_WAIT = 5.0


class LeaderOnly:
    """A mixin for a Celery beat scheduler: it schedules only while this process leads its election."""

    max_interval: float
    app: Any

    candidacy: Election | None = None

    def setup_schedule(self) -> None:
        """Start contending (beat also makes a "lazy" scheduler, to print its banner: that one never does)."""
        from .. import election

        if self.candidacy is None:
            self._elected = threading.Event()
            name = self.app.conf.get("beat_simba_election") or DEFAULT_ELECTION
            self.candidacy = election(name, on_elected=self._on_elected, on_revoked=self._on_revoked)
        super().setup_schedule()  # type: ignore[misc]

    def _on_elected(self, term: Term) -> None:
        logger.info("django-simba: this beat schedules now (%r, token %d)", term.name, term.token)
        self._elected.set()

    def _on_revoked(self, term: Term) -> None:
        self._elected.clear()

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if self.candidacy is None or self.candidacy.term is None:
            # Not the leader: wait to be elected (or a while), then tick again.
            self._elected.wait(min(self.max_interval, IDLE_WAIT))
            return 0
        return float(super().tick(*args, **kwargs))  # type: ignore[misc]

    def apply_async(
        self, entry: ScheduleEntry, producer: Any = None, advance: bool = True, **kwargs: Any
    ) -> Any:
        term = self.candidacy.term if self.candidacy is not None else None  # in memory, just before sending
        if term is None:
            logger.debug("django-simba: %s not sent: this beat does not lead", entry.name)
            return None
        options = dict(entry.options)
        marks = {"simba_lease": term.name, "simba_token": term.token}
        options["headers"] = {**options.get("headers", {}), **marks}
        marked = type(entry)(**dict(entry, options=options))
        return super().apply_async(marked, producer, advance, **kwargs)  # type: ignore[misc]

    def close(self) -> None:
        if self.candidacy is not None:
            self.candidacy.close()  # another host's beat takes over at once
        super().close()  # type: ignore[misc]


class LeaderScheduler(LeaderOnly, PersistentScheduler):  # type: ignore[misc]  # celery ships no types
    """Celery's default scheduler, scheduling on the elected host only."""
