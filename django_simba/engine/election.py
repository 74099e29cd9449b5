"""Elections: a candidate that keeps contending for a name and is told when it leads.

A candidate that is not leader tries at ``renew_interval / 2`` plus jitter, or at
once when the backend notifies a release. ``on_elected(term)`` and
``on_revoked(term)`` run on the engine's callback thread, one at a time, in the
order the events happened. ``is_leader`` is checked in memory: it turns False
the moment the term's local deadline passes, even before ``on_revoked`` runs.

A candidacy started in a process that does not serve (the engine holds: see
:mod:`.prefork`) is kept there and never leads in that process, unless it was made
with ``serving_only=False``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..spi import LeaseInfo, validate_name
from .callbacks import check_callback
from .config import check_seconds
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
        port: Port,
        name: str,
        *,
        on_elected: Callback | None = None,
        on_revoked: Callback | None = None,
        serving_only: bool = True,
    ) -> None:
        super().__init__(validate_name(name))
        check_callback("on_elected", on_elected)
        check_callback("on_revoked", on_revoked)
        self.port = port
        self.on_elected = on_elected
        self.on_revoked = on_revoked
        #: False: contend even in a process that does not serve (one that asks to lead, e.g. a script).
        self.serving_only = serving_only
        #: Kept by a process that does not serve: it does not contend here.
        self.held = False
        self._term: Term | None = None
        self._closed = False
        self.terms_won = 0
        self._decided = threading.Event()  # set once an attempt won or found another leader
        #: Called (mutex held, never blocking) whenever leadership may have changed: async waiters.
        self._listeners: list[Callable[[], None]] = []

    def start(self) -> Election:
        """Begin contending (called by the engine's factory); a pre-fork parent keeps it for its children."""
        with self.port.mutex:
            if self.serving_only and self.port.park_for_fork(self):
                self.held = True
                self._decided.set()  # decided: it does not lead here
                return self
        self.port.start()
        with self.port.mutex:
            self.port.enqueue(self)
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
        return self._decided.wait(check_seconds("timeout", timeout))

    def leader(self) -> LeaseInfo | None:
        """Who leads now, as the backend sees it (one backend call; no candidacy needed)."""
        return self.port.owner(self.name)

    def close(self) -> None:
        """Stop contending; a leader releases at once (``on_revoked`` runs)."""
        port = self.port
        with port.mutex:
            if self._closed:
                return
            self._closed = True
            port.withdraw(self)
            term = self._term
        if term is not None:
            port.release_now(self, term)

    def on_granted(self, term: Term) -> bool:
        if self._closed:
            return False
        self._term = term
        self.terms_won += 1
        self._decided.set()
        self._changed()
        if self.on_elected is not None:
            on_elected = self.on_elected
            self.port.run_callback(lambda: on_elected(term))
        return True

    def contends_after_fork(self) -> bool:
        return not self._closed

    def on_forked(self) -> None:
        """In a forked child: the parent's term is not ours; contend afresh."""
        self._term = None
        self.held = False
        self._decided = threading.Event()

    def on_refused(self) -> None:
        self._decided.set()
        self._changed()

    def on_engine_closed(self) -> None:
        self._changed()

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (engine mutex held; it must not block) whenever leadership may change."""
        with self.port.mutex:
            self._listeners = [*self._listeners, listener]

    def remove_listener(self, listener: Callable[[], None]) -> None:
        with self.port.mutex:
            self._listeners = [x for x in self._listeners if x is not listener]

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

    def on_ended(self, term: Term, reason: EndReason) -> None:
        if self._term is term:
            self._term = None
        self._changed()
        if self.on_revoked is not None:
            on_revoked = self.on_revoked
            self.port.run_callback(lambda: on_revoked(term))
        if not self._closed and reason is not EndReason.CLOSED:
            # Back in line; after a loss the holder is elsewhere, so do not hammer the backend.
            delay = None if reason in (EndReason.SESSION_EXPIRED, EndReason.DEADLINE) else self._retry_delay()
            self.port.enqueue(self, delay=delay)

    def _retry_delay(self) -> float:
        half = self.port.config.renew_interval / 2
        return half + self.port.runtime.random.uniform(0, half / 2)

    def __repr__(self) -> str:
        return f"<Election {self.name!r} leader={self.is_leader}>"
