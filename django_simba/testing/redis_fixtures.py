"""For test fixtures that start a Redis server or a Redis Cluster of their own.

A Redis server the backend has never written to holds new terms back for one lease at its
first grant, as after a data loss (it cannot tell the two apart; see the Redis backend's
docs). A fixture that starts a fresh server, or shares one across a test run, calls
:func:`assume_nothing_lost` once so that its tests do not wait. Never in production.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def assume_nothing_lost(options: Mapping[str, Any] | str, *, timeout: float = 5.0) -> int:
    """Mark the server of ``options`` (the Redis backend's OPTIONS, or a ``redis://`` URL) as complete.

    Returns how many markers were missing (one per database on a single node, one per hash
    slot on a cluster). An active hold-back is left to run its course.
    """
    from ..backends.redis import RedisBackend

    backend = RedisBackend({"url": options} if isinstance(options, str) else options, timeout=timeout)
    try:
        return backend.assume_nothing_lost()
    finally:
        backend.close()
