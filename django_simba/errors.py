"""Every exception the library raises, in one place.

Everything a caller can act on derives from :class:`SimbaError`, so
``except SimbaError`` catches every failure of the library and nothing else.
This module imports nothing of the package: the backend interface, the
backends, the engine, fencing and the Django layer all take their errors from
here, and ``django_simba`` re-exports each of them. The one warning category
the library issues lives here too.

Exceptions that never leave the module raising them (a dead connection the
database backend retries on, a ZooKeeper node that vanished while a line was
read) are private to that module, named with a leading underscore or caught
where they are raised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engine.term import EndReason, Term


class SimbaError(Exception):
    """Base class of every error raised by django-simba."""


class InvalidName(SimbaError, ValueError):
    """A lease or group name breaks a naming rule: 1 to 128 of ``[A-Za-z0-9._:-]``, not ``.`` or ``..``."""

    def __init__(self, name: object, rule: str) -> None:
        self.name = name
        self.rule = rule
        super().__init__(f"invalid name {name!r}: {rule}")


class InvalidMetadata(SimbaError, ValueError):
    """Session metadata is not a string of at most 1024 printable characters."""


class SessionExpired(SimbaError):
    """The session is no longer live; it is never revived, open a new one."""

    def __init__(self, session_id: str = "") -> None:
        self.session_id = session_id
        super().__init__(f"session {session_id or '?'} expired")


class LockTimeout(SimbaError, TimeoutError):
    """A blocking acquire did not get the lock within its timeout."""


class BackendUnavailable(SimbaError):
    """The backend could not be reached or refused the call."""


class BackendTimeout(BackendUnavailable, TimeoutError):
    """A backend call did not answer within its timeout; it may or may not have been applied."""


class ConfigurationError(SimbaError):
    """The configuration is invalid (a setting, a backend option, a server setting).

    ``hint`` says how to fix this very problem; the system check shows it (else the backend's own).
    """

    def __init__(self, *args: object, hint: str | None = None) -> None:
        super().__init__(*args)
        self.hint = hint


class UnsafeAcl(ConfigurationError):
    """A ZooKeeper node the backend relies on lets others do more than the configured ACL allows."""

    check_id = "django_simba.E025"
    check_hint = (
        "Fix the node's ACL (zkCli.sh: setAcl -R <node> <acl>), after looking for nodes planted "
        "under it, or give SIMBA['OPTIONS'] a new 'root' for the backend to create with its ACL."
    )


class NotSupported(SimbaError, NotImplementedError):
    """The backend does not support this operation."""


class LeaseNotHeld(SimbaError):
    """An operation needs a term this contender does not hold (e.g. releasing an unheld lock)."""


class LeaseLost(LeaseNotHeld):
    """A held term ended before its holder released it: the work done under it since may have
    run unprotected. ``reason`` says how it ended (an ``EndReason`` other than RELEASED)."""

    def __init__(self, term: Term, reason: EndReason) -> None:
        self.term = term
        self.reason = reason
        super().__init__(f"the term {term.name!r}#{term.token} had already ended ({reason.value})")


class LockHeld(SimbaError):
    """This lock object is already held by the caller (locks are not re-entrant)."""


class EngineClosed(SimbaError):
    """The engine was closed (a waiter still in line wakes with this); the next use builds a new one."""


# -- fencing: why a fenced write was refused ---------------------------------------------------


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


# -- warnings ------------------------------------------------------------------------------------


class EvictionPolicyWarning(RuntimeWarning):
    """The Redis server would evict keys with a TTL (``volatile-*``) once a ``maxmemory`` is set."""
