"""Hooks through which the layers above (signals, metrics, logs) watch the engine.

Every hook runs after the engine's own state has changed, one at a time, on the callback
thread; an exception in a hook is logged and ignored. Two ways to cost less, since a grant
and an end come at every lock cycle: an observer says which hooks would do nothing now
(:meth:`EngineObserver.listens`: no Django receiver connected), and the engine skips them;
an ``inline`` observer, whose hooks only count, runs them at once in the thread that changed
the state, sparing the callback thread a wake-up.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, ClassVar, Literal

if TYPE_CHECKING:
    from .term import EndReason, Term

logger = logging.getLogger("django_simba.engine")

#: The hooks, by name (:meth:`EngineObserver.listens`, ``Context.notify_observers``).
Hook = Literal["session_opened", "session_lost", "keep_alive_done", "term_started", "term_ended"]


class EngineObserver:
    """Subclass and override what you need; every method defaults to doing nothing."""

    #: Run the hooks in the thread that changed the engine's state, with the engine's mutex held,
    #: instead of on the callback thread. Only for hooks that are quick, never block and never
    #: call the engine (counters, gauges).
    inline: ClassVar[bool] = False

    def listens(self, hook: Hook) -> bool:
        """Whether ``hook`` would do anything now; the engine skips it when not.

        Asked at every event, with the engine's mutex held: it must be cheap. By default, the
        hooks the observer's class overrides.
        """
        return getattr(type(self), hook) is not getattr(EngineObserver, hook)

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


def call_hooks(observers: list[EngineObserver], hook: Hook, args: tuple[object, ...]) -> None:
    """``hook(*args)`` of each observer in turn; one that raises is logged and the others still run."""
    for observer in observers:
        try:
            getattr(observer, hook)(*args)
        except Exception:
            logger.exception("django-simba: the observer %r raised in %s; the engine goes on", observer, hook)
