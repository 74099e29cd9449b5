"""The test kit: the TCKs for backends, for the engine over them and for its semaphores, the
pytest plugin and its fixtures, helpers, the simulation.

The TCK needs pytest and hypothesis (the ``test`` extra); it is imported on first use, so the
pytest plugin (``django_simba.testing.plugin``) loads without hypothesis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .waiting import wait_until

if TYPE_CHECKING:
    from .engine_tck import EngineTCK
    from .semaphore_tck import SemaphoreTCK
    from .tck import BackendTCK

__all__ = ["BackendTCK", "EngineTCK", "SemaphoreTCK", "wait_until"]


def __getattr__(name: str) -> Any:
    if name == "BackendTCK":
        from .tck import BackendTCK

        return BackendTCK
    if name == "EngineTCK":
        from .engine_tck import EngineTCK

        return EngineTCK
    if name == "SemaphoreTCK":
        from .semaphore_tck import SemaphoreTCK

        return SemaphoreTCK
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
