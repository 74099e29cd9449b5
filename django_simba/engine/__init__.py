"""The engine: sessions, locks, semaphores, elections and groups over any backend.

Knows nothing of Django. All timing goes through a :class:`Runtime`, so the
same code runs on threads in production and on a virtual clock in the
simulation.
"""

from ..errors import EngineClosed, LeaseLost, LockHeld
from .alock import AsyncLock
from .config import EngineConfig
from .election import Election
from .engine import Engine
from .group import Group
from .lock import Lock
from .observer import EngineObserver
from .port import Port
from .runtime import CONTEND_LANE, SESSION_LANE, Outcome, Runtime, ThreadRuntime, Timer
from .semaphore import MAX_PERMITS, AsyncSemaphore, Semaphore
from .term import EndReason, Term

__all__ = [
    "CONTEND_LANE",
    "MAX_PERMITS",
    "SESSION_LANE",
    "AsyncLock",
    "AsyncSemaphore",
    "Election",
    "EndReason",
    "Engine",
    "EngineClosed",
    "EngineConfig",
    "EngineObserver",
    "Group",
    "LeaseLost",
    "Lock",
    "LockHeld",
    "Outcome",
    "Port",
    "Runtime",
    "Semaphore",
    "Term",
    "ThreadRuntime",
    "Timer",
]
