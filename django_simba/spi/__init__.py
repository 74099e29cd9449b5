"""The backend interface (SPI): what the engine needs from a storage, and its reply types.

Knows nothing of Django nor of the engine; backends and the engine both depend on it.
"""

from .backend import DEFAULT_TIMEOUT, MAX_PURGE_LIMIT, LeaseBackend, NotificationListener, OptionsProblem
from .durations import format_duration
from .errors import (
    BackendTimeout,
    BackendUnavailable,
    ConfigurationError,
    InvalidMetadata,
    InvalidName,
    LeaseNotHeld,
    LockTimeout,
    NotSupported,
    SessionExpired,
    SimbaError,
    UnsafeAcl,
)
from .names import MAX_METADATA_LENGTH, MAX_NAME_LENGTH, validate_metadata, validate_name, validate_prefix
from .redaction import redact
from .types import (
    Grant,
    LeaseInfo,
    Member,
    Notification,
    NotificationKind,
    OpenedSession,
    Released,
    Renewal,
    SessionInfo,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_METADATA_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_PURGE_LIMIT",
    "BackendTimeout",
    "BackendUnavailable",
    "ConfigurationError",
    "Grant",
    "InvalidMetadata",
    "InvalidName",
    "LeaseBackend",
    "LeaseInfo",
    "LeaseNotHeld",
    "LockTimeout",
    "Member",
    "NotSupported",
    "Notification",
    "NotificationKind",
    "NotificationListener",
    "OpenedSession",
    "OptionsProblem",
    "Released",
    "Renewal",
    "SessionExpired",
    "SessionInfo",
    "SimbaError",
    "UnsafeAcl",
    "format_duration",
    "redact",
    "validate_metadata",
    "validate_name",
    "validate_prefix",
]
