"""django-simba: distributed coordination for Django.

Public API::

    from django_simba import lock, semaphore, election, group, owner, leases, singleton_task

Importing the package imports nothing from Django and starts no thread; the
functions load the Django layer on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import (
    BackendTimeout,
    BackendUnavailable,
    ConfigurationError,
    EngineClosed,
    EvictionPolicyWarning,
    InvalidMetadata,
    InvalidName,
    LeaseLost,
    LeaseNotHeld,
    LockHeld,
    LockTimeout,
    NotSupported,
    SessionExpired,
    SimbaError,
    StaleToken,
    TermEnded,
    UnsafeAcl,
    WrongLease,
)
from .lazy import lazy_exports
from .redacted_logs import LOGGERS, redact_records_of

redact_records_of(*LOGGERS)  # before any module logs: no credential in any record of the package

__version__ = "0.1.0.dev0"

_LAZY = {
    "lock": "django_simba.api",
    "semaphore": "django_simba.api",
    "election": "django_simba.api",
    "group": "django_simba.api",
    "owner": "django_simba.api",
    "leases": "django_simba.api",
    "singleton_task": "django_simba.decorators",
    "alock": "django_simba.aio",
    "asemaphore": "django_simba.aio",
    "aelection": "django_simba.aio",
    "agroup": "django_simba.aio",
    "aowner": "django_simba.aio",
    "aleases": "django_simba.aio",
    "get_engine": "django_simba.registry",
    "is_serving_process": "django_simba.servers.serving",
    "Term": "django_simba.engine",
    "EndReason": "django_simba.engine",
    "fenced": "django_simba.fencing",
}

if TYPE_CHECKING:
    from .aio import aelection, agroup, aleases, alock, aowner, asemaphore
    from .api import election, group, leases, lock, owner, semaphore
    from .decorators import singleton_task
    from .engine import EndReason, Term
    from .fencing import fenced
    from .registry import get_engine
    from .servers.serving import is_serving_process


__getattr__ = lazy_exports(__name__, globals(), _LAZY)


__all__ = [
    "BackendTimeout",
    "BackendUnavailable",
    "ConfigurationError",
    "EndReason",
    "EngineClosed",
    "EvictionPolicyWarning",
    "InvalidMetadata",
    "InvalidName",
    "LeaseLost",
    "LeaseNotHeld",
    "LockHeld",
    "LockTimeout",
    "NotSupported",
    "SessionExpired",
    "SimbaError",
    "StaleToken",
    "Term",
    "TermEnded",
    "UnsafeAcl",
    "WrongLease",
    "aelection",
    "agroup",
    "aleases",
    "alock",
    "aowner",
    "asemaphore",
    "election",
    "fenced",
    "get_engine",
    "group",
    "is_serving_process",
    "leases",
    "lock",
    "owner",
    "semaphore",
    "singleton_task",
]
