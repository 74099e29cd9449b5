"""Reply types of the backend interface: small, frozen, and free of absolute times.

Every ``remaining`` is a duration in seconds measured by the backend's clock
(design: Rules, durations); the engine turns it into a local deadline itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True, slots=True)
class OpenedSession:
    """Reply of ``open_session``."""

    session_id: str
    remaining: float


@dataclass(frozen=True, slots=True)
class Renewal:
    """Reply of ``keep_alive``: the session's remaining time and every lease it still owns."""

    remaining: float
    owned: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Grant:
    """Reply of a successful ``acquire``: the term's token and how long the lease lasts."""

    name: str
    token: int
    remaining: float


@dataclass(frozen=True, slots=True)
class Released:
    """Reply of ``release``.

    ``held``: whether the name was still this session's term when the release arrived
    (False: it had been freed, force-released, expired or taken over before; None: the
    backend cannot tell). ``contended``: where the backend keeps track of it (the polled
    ones), whether another session was refused the name during the term; a hint only.
    """

    held: bool | None = None
    contended: bool | None = None


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    """A live holder of a lease, as seen by ``owner`` and ``leases``."""

    name: str
    session_id: str
    token: int
    remaining: float
    metadata: str


@dataclass(frozen=True, slots=True)
class Member:
    """A live member of a group."""

    session_id: str
    metadata: str


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session, for status tools. ``remaining`` <= 0 means expired but not yet purged."""

    session_id: str
    remaining: float
    metadata: str


class NotificationKind(Enum):
    RELEASED = "released"  # a lease name was released: candidates may take over now
    HANDED_OVER = "handed_over"  # a release gave the name to the first session of its line
    GROUP_CHANGED = "group_changed"  # a group's membership changed
    RESYNC = "resync"  # notifications may have been missed (reconnect): re-check everything


@dataclass(frozen=True, slots=True)
class Notification:
    kind: NotificationKind
    name: str = ""
    #: HANDED_OVER only: the session that holds the name now, and its term's token.
    session_id: str = ""
    token: int = 0
