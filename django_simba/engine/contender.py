"""The contender protocol: what the engine calls on anything that contends for a name.

A lock's or a semaphore's acquisition (``lock.py``), an election (``election.py``) and the
simulation's actors implement it; the engine's lines of names (``lines.py``), its fork handling
(``engine.py``, ``prefork.py``) call it. Its methods are public because it is a protocol
between modules: ``on_*`` reports what became of the contender's attempts and terms,
``take_attempt`` and ``contends_after_fork`` ask it a question.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .term import EndReason, Term


class Contender:
    """A local contender: the engine grants it terms and tells it what became of its attempts.

    Every method is called with the engine's mutex held: they only update state and wake
    whoever waits (user callbacks go through the runtime's callback thread).
    """

    kind = "contender"

    def __init__(self, name: str, *, waits: bool = True) -> None:
        self.name = name
        #: Keeps trying until it gets the name: a refusal puts its session in the backend's line.
        self.waits = waits
        #: The session of an attempt lent to this contender's own thread, until it makes it.
        self.lent_session: str | None = None

    def on_granted(self, term: Term) -> bool:
        """Take ``term``; return False when this contender no longer wants it."""
        raise NotImplementedError

    def on_ended(self, term: Term, reason: EndReason) -> None:
        """The term this contender held has ended."""
        raise NotImplementedError

    def on_refused(self) -> None:
        """An attempt found the name held by another session (or by another contender here)."""

    def on_attempt_failed(self, error: BaseException) -> None:
        """An attempt for the name failed (the backend did not answer); it is retried later."""

    def on_engine_closed(self) -> None:
        """The engine closed while this contender waited in line: it will never be granted."""

    def take_attempt(self, session_id: str) -> bool:
        """Take over the next attempt, to make it from a thread of one's own; False to leave it to the engine.

        A caller blocked until it gets the name makes the attempt itself when woken: one thread
        switch fewer than an attempt on the engine's lane, whose reply must then wake it.
        """
        return False

    def contends_after_fork(self) -> bool:
        """In a forked child: whether to go on contending there (a lock's waiting thread is gone)."""
        return False

    def on_forked(self) -> None:
        """In a forked child, before contending afresh: forget the parent's term."""
