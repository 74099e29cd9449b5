"""Elections: a candidate that keeps contending for a name and is told when it leads.

A candidate that is not leader tries at ``renew_interval / 2`` plus jitter, or at
once when the backend notifies a release. ``on_elected(term)`` and
``on_revoked(term)`` run on the engine's callback thread, one at a time, in the
order the events happened. ``is_leader`` is checked in memory: it turns False
the moment the term's local deadline passes, even before ``on_revoked`` runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..spi import LeaseInfo, validate_name
from .contender import Contender
from .term import EndReason, Term

if TYPE_CHECKING:
    from .port import Port

Callback = Callable[[Term], Any]


class Election(Contender):
    """One candidacy for ``name``. Create it through :meth:`Engine.election`; end it with :meth:`close`."""

    kind = "election"

    def __init__(
        self,
        engine: Port,
        name: str,
        *,
        on_elected: Callback | None = None,
        on_revoked: Callback | None = None,
    ) -> None:
        super().__init__(validate_name(name))
        self.engine = engine
        self.on_elected = on_elected
        self.on_revoked = on_revoked
        self._term: Term | None = None
        self._closed = False
        self.terms_won = 0
        self._decided = threading.Event()  # set once an attempt won or found another leader
        #: Called (mutex held, never blocking) whenever leadership may have changed: async waiters.
        self._listeners: list[Callable[[], None]] = []

    def start(self) -> Election:
        """Begin contending (called by the engine's factory); a pre-fork parent keeps it for its children."""
        with self.engine.mutex:
            if self.engine.park_for_fork(self):
                return self
        self.engine.start()
        with self.engine.mutex:
            self.engine.enqueue(self)
        return self

    @property
    def term(self) -> Term | None:
        """The current term while leader, else ``None``."""
        term = self._term
        return term if term is not None and term.is_valid() else None

    @property
    def is_leader(self) -> bool:
        return self.term is not None

    @property
    def closed(self) -> bool:
        return self._closed

    def wait_decided(self, timeout: float | None) -> bool:
        """Wait until the first attempt is answered (won, or held elsewhere); False on timeout."""
        return self._decided.wait(timeout)

    def leader(self) -> LeaseInfo | None:
        """Who leads now, as the backend sees it (one backend call; no candidacy needed)."""
        return self.engine.owner(self.name)

    def close(self) -> None:
        """Stop contending; a leader releases at once (``on_revoked`` runs)."""
        engine = self.engine
        with engine.mutex:
            if self._closed:
                return
            self._closed = True
            engine.withdraw(self)
            term = self._term
        if term is not None:
            engine.release_now(self, term)

    def _granted(self, term: Term) -> bool:
        if self._closed:
            return False
        self._term = term
        self.terms_won += 1
        self._decided.set()
        self._changed()
        if self.on_elected is not None:
            on_elected = self.on_elected
            self.engine.run_callback(lambda: on_elected(term))
        return True

    def _contends_after_fork(self) -> bool:
        return not self._closed

    def _forked(self) -> None:
        """In a forked child: the parent's term is not ours; contend afresh."""
        self._term = None
        self._decided = threading.Event()

    def _refused(self) -> None:
        self._decided.set()
        self._changed()

    def _engine_closed(self) -> None:
        self._changed()

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (engine mutex held; it must not block) whenever leadership may change."""
        with self.engine.mutex:
            self._listeners = [*self._listeners, listener]

    def remove_listener(self, listener: Callable[[], None]) -> None:
        with self.engine.mutex:
            self._listeners = [x for x in self._listeners if x is not listener]

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

    def _ended(self, term: Term, reason: EndReason) -> None:
        if self._term is term:
            self._term = None
        self._changed()
        if self.on_revoked is not None:
            on_revoked = self.on_revoked
            self.engine.run_callback(lambda: on_revoked(term))
        if not self._closed and reason is not EndReason.CLOSED:
            # Back in line; after a loss the holder is elsewhere, so do not hammer the backend.
            delay = None if reason in (EndReason.SESSION_EXPIRED, EndReason.DEADLINE) else self._retry_delay()
            self.engine.enqueue(self, delay=delay)

    def _retry_delay(self) -> float:
        half = self.engine.config.renew_interval / 2
        return half + self.engine.runtime.random.uniform(0, half / 2)

    def __repr__(self) -> str:
        return f"<Election {self.name!r} leader={self.is_leader}>"
