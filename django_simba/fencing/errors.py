"""Why a fenced write was refused.

These derive from :class:`~django_simba.spi.errors.SimbaError` and need
nothing else, so they can live wherever the library keeps its errors.
"""

from __future__ import annotations

from ..spi.errors import SimbaError


class StaleToken(SimbaError):
    """A fenced write was refused: the caller's term can no longer be trusted to write.

    Raised when a newer term of the lease already wrote the row (``newer`` is
    the token the row holds, when it could be read back). Its subclass
    :class:`TermEnded` is raised when the term ended in this process before the
    write was sent, so ``except StaleToken`` catches both.
    """

    def __init__(self, lease: str, token: int, newer: int | None = None, message: str | None = None) -> None:
        self.lease = lease
        self.token = token
        self.newer = newer
        if message is None:
            by = f" with token {newer}" if newer is not None else ""
            message = f"token {token} of lease {lease!r} is stale: a newer term wrote the row{by}"
        super().__init__(message)


class TermEnded(StaleToken):
    """The term is no longer valid in this process, so the write was not sent (or the section ended late)."""

    def __init__(self, lease: str, token: int, when: str = "the write") -> None:
        message = f"the term of lease {lease!r} (token {token}) ended before {when}"
        super().__init__(lease, token, message=message)


class WrongLease(SimbaError, ValueError):
    """The row is fenced by the terms of another lease name; tokens of two names cannot be compared."""

    def __init__(self, lease: str, fenced_by: str) -> None:
        self.lease = lease
        self.fenced_by = fenced_by
        super().__init__(
            f"the row is fenced by lease {fenced_by!r}, not {lease!r}: a row is fenced by one lease name only"
        )
