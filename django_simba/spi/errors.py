"""The exception hierarchy shared by every layer (SPEC 7).

Everything a caller can act on derives from :class:`SimbaError`, so
``except SimbaError`` catches every failure of the library and nothing else.
"""

from __future__ import annotations


class SimbaError(Exception):
    """Base class of every error raised by django-simba."""


class InvalidName(SimbaError, ValueError):
    """A lease or group name breaks one of the naming rules (SPEC 2.5)."""

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
    """The configuration is invalid (a setting, a backend option, a server setting)."""


class NotSupported(SimbaError, NotImplementedError):
    """The backend does not support this operation."""


class LeaseNotHeld(SimbaError):
    """An operation needs a term this contender does not hold (e.g. releasing an unheld lock)."""
