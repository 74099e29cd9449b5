"""Django signals mirroring the engine's callbacks.

Sent from the engine's callback thread, one at a time. Receivers get the
``term`` (with ``.name`` and ``.token``) or the ``session_id``:

- ``elected(sender, kind, term)``: a lock (``kind="lock"``) or election won a term;
- ``revoked(sender, kind, term, reason)``: a term ended (released, lost, expired...);
- ``lease_lost(sender, kind, term, reason)``: a term ended without its holder releasing it;
- ``session_opened(sender, session_id)`` / ``session_expired(sender, session_id, reason)``.
"""

from __future__ import annotations

from django.dispatch import Signal

from .engine import EndReason, EngineObserver, Term

elected = Signal()
revoked = Signal()
lease_lost = Signal()
session_opened = Signal()
session_expired = Signal()


class SignalObserver(EngineObserver):
    """Sends the signals above for one engine."""

    def session_opened(self, session_id: str) -> None:
        session_opened.send(sender=SignalObserver, session_id=session_id)

    def session_lost(self, session_id: str, reason: EndReason) -> None:
        session_expired.send(sender=SignalObserver, session_id=session_id, reason=reason)

    def term_started(self, kind: str, term: Term) -> None:
        elected.send(sender=SignalObserver, kind=kind, term=term)

    def term_ended(self, kind: str, term: Term, reason: EndReason) -> None:
        revoked.send(sender=SignalObserver, kind=kind, term=term, reason=reason)
        if reason not in (EndReason.RELEASED, EndReason.CLOSED):
            lease_lost.send(sender=SignalObserver, kind=kind, term=term, reason=reason)
