"""A term: one holder's tenure of a lease name, with its fencing token."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum


class EndReason(Enum):
    RELEASED = "released"  # the holder released it
    MAX_HOLD = "maximum hold time reached"  # released for the holder, whose work may still run
    TAKEN = "taken"  # no longer the session's on the backend: taken over or force-released
    SESSION_EXPIRED = "session expired"  # the backend reported the session gone
    DEADLINE = "deadline passed"  # no renewal reached us before the local deadline
    CLOSED = "engine closed"
    FORKED = "forked"  # in a child process: the parent's terms are not the child's

    def __init__(self, value: str) -> None:
        #: Whether a term that ended so was lost: every end but its holder's own release.
        #:
        #: The one rule for ``on_lost``, the ``term_lost`` signal, the ``terms_lost`` metric, the
        #: engine's warning and ``LeaseLost``: whatever the holder did after such an end was not
        #: protected by the term (an engine closed while a term is held ends it too). An attribute
        #: set once per member, not a property: every end of a term reads it several times.
        self.is_loss = value != "released"

    @property
    def explained(self) -> str:
        """The reason in words, for logs."""
        return _EXPLAINED.get(self, self.value)


_EXPLAINED = {
    EndReason.TAKEN: "taken over, or force-released by an operator",
    EndReason.MAX_HOLD: "its maximum hold time was reached",
    EndReason.DEADLINE: "its local deadline passed without a renewal",
    EndReason.CLOSED: "the engine closed",
}


class Term:
    """An exclusive tenure of ``name`` by one local contender.

    ``token`` is the fencing token: pass it to every resource you write while
    holding the term, and have the resource refuse tokens lower than the
    highest it has seen. ``is_valid()`` is checked in memory, with no I/O.
    """

    __slots__ = ("_clock", "_deadline", "_ended", "_pid", "_pid_of", "name", "session_id", "token")

    def __init__(
        self,
        name: str,
        token: int,
        session_id: str,
        deadline: float,
        clock: Callable[[], float],
        pid_of: Callable[[], int],
        pid: int | None = None,
    ):
        self.name = name
        self.token = token
        self.session_id = session_id
        self._deadline = deadline
        self._clock = clock
        self._pid_of = pid_of
        # A child forked without Python's hooks inherits this object, not the term. ``pid``: the
        # process the engine already knows it runs in (a getpid is a system call).
        self._pid = pid_of() if pid is None else pid
        self._ended: EndReason | None = None

    def is_valid(self) -> bool:
        """True while the term has not ended, its local deadline has not passed, and this is
        the process it was granted to."""
        return self._ended is None and self._clock() < self._deadline and self._pid_of() == self._pid

    __bool__ = is_valid

    @property
    def remaining(self) -> float:
        """Seconds this process may still act as holder without a renewal (0 once invalid)."""
        if self._ended is not None:
            return 0.0
        left = self._deadline - self._clock()
        return left if left > 0.0 else 0.0  # max(0.0, left) without the call: read at every step

    @property
    def ended(self) -> EndReason | None:
        """Why the term ended, or ``None`` while it has not (it may still have timed out)."""
        return self._ended

    def _extend(self, deadline: float) -> None:
        if deadline > self._deadline:
            self._deadline = deadline

    def _end(self, reason: EndReason) -> bool:
        if self._ended is not None:
            return False
        self._ended = reason
        return True

    def _lost_before_release(self) -> None:
        """A release found the name no longer this term's: it had been lost before it."""
        self._ended = EndReason.TAKEN

    def __repr__(self) -> str:
        state = "valid" if self.is_valid() else (self._ended.value if self._ended else "timed out")
        return f"<Term {self.name!r} token={self.token} {state}>"
