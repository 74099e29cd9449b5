"""The test kit: the TCK for backends, the pytest plugin and its fixtures, helpers, the simulation.

The TCK needs pytest and hypothesis (the ``test`` extra); it is imported on first use, so the
pytest plugin (``django_simba.testing.plugin``) loads without hypothesis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .waiting import wait_until

if TYPE_CHECKING:
    from .tck import BackendTCK

__all__ = ["BackendTCK", "wait_until"]


def __getattr__(name: str) -> Any:
    if name == "BackendTCK":
        from .tck import BackendTCK

        return BackendTCK
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
