"""The test kit: the TCK for backends, helpers, and the deterministic simulation.

Importing it needs pytest and hypothesis (the ``test`` extra).
"""

from .tck import BackendTCK
from .waiting import wait_until

__all__ = ["BackendTCK", "wait_until"]
