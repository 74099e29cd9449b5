"""New terms held back after a server lost its data: the scripts' answer, and the one warning.

A grant script that finds its marker missing (or left by another server process that did
not replay its own AOF: see ``lua/_marker.lua``) begins a new epoch and grants no new term
for the longest lease it knows, so that no holder of a term the server forgot still trusts
it. The acquire reports such a refusal as "held by another" (``None``): the contender tries
again later, as after any refusal. A keep-alive that finds its session gone, or its terms
over, while an epoch is under way (its script reads the marker too) learns the same: the
server lost the session or its terms with its data. This module only tells the operator,
with one WARNING per process for each loss it notices, whichever reply it noticed it in
(not one per refused attempt or per session).
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable

from ...spi.clock import local_clock

logger = logging.getLogger("django_simba.backends.redis")

#: What the grant scripts answer when no new term may be granted yet: ``{HELD_BACK, ms left, began}``.
HELD_BACK = 3
#: How a refused grant noticed the loss, for the warning.
AT_GRANT = "a new term was refused"


class HoldBacks:
    """Warns once per hold-back: again only for one seen after the last one warned of had ended."""

    def __init__(self, clock: Callable[[], float] = local_clock) -> None:
        self._clock = clock
        self._mutex = threading.Lock()
        self._warned_until = float("-inf")  # local clock: when the last hold-back warned of ends

    def held_back(self, where: str, remaining_ms: int, noticed: str = AT_GRANT) -> None:
        """``where`` holds new terms back ``remaining_ms`` more; ``noticed``: in which reply."""
        remaining = max(0, remaining_ms) / 1000
        with self._mutex:
            now = self._clock()
            warn = now >= self._warned_until
            self._warned_until = max(self._warned_until, now + remaining)
        if warn:
            until = datetime.datetime.now() + datetime.timedelta(seconds=remaining)  # for people only
            logger.warning(
                "django-simba: %s has lost the terms it granted before, or is new (a restart without "
                "persistence or from an older snapshot, FLUSHALL/FLUSHDB, a failover to a replica, or a "
                "first start): no new term of any name is granted there for %.1f s more, until about "
                "%s, so that no holder of a term granted before may still trust it; tokens then go on "
                "from the server's clock, above every earlier one (noticed here when %s)",
                where,
                remaining,
                until.strftime("%H:%M:%S"),
                noticed,
            )


def at_keep_alive(session_id: str, *, live: bool) -> str:
    """How a keep-alive noticed the loss, for the warning."""
    if live:
        return f"the keep-alive of session {session_id} found the terms it held there over"
    return f"the keep-alive of session {session_id} found it gone, with its terms and memberships"
