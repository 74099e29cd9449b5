"""The errors of the backend interface: the library's own, from :mod:`django_simba.errors`."""

from ..errors import (
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

__all__ = [
    "BackendTimeout",
    "BackendUnavailable",
    "ConfigurationError",
    "InvalidMetadata",
    "InvalidName",
    "LeaseNotHeld",
    "LockTimeout",
    "NotSupported",
    "SessionExpired",
    "SimbaError",
    "UnsafeAcl",
]
