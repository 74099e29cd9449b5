"""Local bookkeeping for one lease name: who holds it here, who waits, what is in flight."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .contender import Contender
from .runtime import Timer
from .term import Term

#: First delay of the polling backoff for backends without notifications.
FIRST_POLL_DELAY = 0.005


@dataclass(slots=True)
class Slot:
    """One name's local state. The engine serializes local contenders through it.

    ``busy`` is the backend operation in flight for this name ("acquire" or
    "release"); while set, no other operation for the name starts, so a local
    release always reaches the backend before the next local acquire.
    """

    name: str
    holder: Contender | None = None
    term: Term | None = None
    granted_at: float = 0.0  # local time the grant's reply arrived
    last_token: int = 0  # tokens handed to local holders strictly increase
    waiting: deque[Contender] = field(default_factory=deque)
    busy: str | None = None
    #: Counts the operations started for the name: a reply knows whether its operation still owns ``busy``.
    op: int = 0
    #: Terms this process gave up while an acquire or a release was in flight: freed once it is over.
    deferred: list[tuple[str, int]] = field(default_factory=list)
    timer: Timer | None = None
    term_timer: Timer | None = None  # ends the held term at its own deadline
    backoff: float = FIRST_POLL_DELAY
    watched: bool = False
    poked: bool = False  # a release was notified while an attempt was in flight: retry at once
    wanted_at: float = float("-inf")  # local time we last learnt another process wants the name
    courtesy_until: float = 0.0  # after our release of a wanted name, others get the first try

    def cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
