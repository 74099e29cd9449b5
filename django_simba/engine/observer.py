"""Hooks through which the layers above (signals, metrics, logs) watch the engine.

Every hook runs on the callback thread, one at a time, after the engine's own
state has changed; an exception in a hook is logged and ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .term import EndReason, Term


class EngineObserver:
    """Subclass and override what you need; every method defaults to doing nothing."""

    def session_opened(self, session_id: str) -> None:
        """A new session is live."""

    def session_lost(self, session_id: str, reason: EndReason) -> None:
        """The session expired or its deadline passed; every term of it has ended."""

    def keep_alive_done(self, seconds: float, ok: bool) -> None:
        """A keep-alive finished (``ok`` False: failed, timed out or came back too late)."""

    def term_started(self, kind: str, term: Term) -> None:
        """A lock or election (``kind``) won a term."""

    def term_ended(self, kind: str, term: Term, reason: EndReason) -> None:
        """A term ended; ``reason`` says why (released, lost, session expired...)."""
