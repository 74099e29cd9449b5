"""Django signals mirroring the engine's observer hooks, and named after them.

Sent from the engine's callback thread, one at a time, and only while a receiver is
connected: with none, the engine does not wake that thread for them. Receivers get the
``term`` (with ``.name`` and ``.token``) or the ``session_id``:

- ``term_started(sender, kind, term)``: a lock (``kind="lock"``), a permit of a semaphore
  (``"semaphore"``) or an election (``"election"``) was granted a term;
- ``term_ended(sender, kind, term, reason)``: a term ended, however (released, lost, expired...);
- ``term_lost(sender, kind, term, reason)``: a term ended any way but by its holder's release
  (``reason.is_loss``, the one rule for losses, an engine closing under it included);
- ``session_opened(sender, session_id)`` / ``session_lost(sender, session_id, reason)``: the
  process's session opened, or ended without being closed (expired on the backend, or its local
  deadline passed).
"""

from __future__ import annotations

from django.dispatch import Signal

from .engine import EndReason, Engine, EngineObserver, Term
from .engine.observer import Hook

term_started = Signal()
term_ended = Signal()
term_lost = Signal()
session_opened = Signal()
session_lost = Signal()


class SignalObserver(EngineObserver):
    """Sends the signals above for one engine."""

    def listens(self, hook: Hook) -> bool:
        # A receiver connected after this check misses only the event that was already under way.
        for signal in _SENT_BY.get(hook, ()):  # noqa: SIM110 - no generator: asked at every grant and end
            if signal.receivers:
                return True
        return False

    def session_opened(self, session_id: str) -> None:
        session_opened.send(sender=SignalObserver, session_id=session_id)

    def session_lost(self, session_id: str, reason: EndReason) -> None:
        session_lost.send(sender=SignalObserver, session_id=session_id, reason=reason)

    def term_started(self, kind: str, term: Term) -> None:
        term_started.send(sender=SignalObserver, kind=kind, term=term)

    def term_ended(self, kind: str, term: Term, reason: EndReason) -> None:
        term_ended.send(sender=SignalObserver, kind=kind, term=term, reason=reason)
        if reason.is_loss:
            term_lost.send(sender=SignalObserver, kind=kind, term=term, reason=reason)


#: The signals each hook may send.
_SENT_BY: dict[str, tuple[Signal, ...]] = {
    "session_opened": (session_opened,),
    "session_lost": (session_lost,),
    "term_started": (term_started,),
    "term_ended": (term_ended, term_lost),
}


def observe(engine: Engine) -> None:
    """Send the signals for ``engine`` (a hook of the registry)."""
    engine.observers.append(SignalObserver())
