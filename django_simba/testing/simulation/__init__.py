"""A deterministic simulation of a cluster of engines over the model backend (SPEC 8).

Several processes, each a real :class:`~django_simba.engine.Engine` on its own
drifting clock, share one virtual world clock, one event heap and the in-memory
backend; a simulated network loses and delays their calls. A seed decides every
fault. After every event an oracle checks that at most one process believes it
holds a name, that tokens only increase, that a fenced register never accepts a
superseded write, and that a crashed leader is replaced in time.

Run it with ``python -m django_simba.testing.simulation --seeds 1000``, replay one
seed with ``--seed N --trace``.
"""

from .config import Premise, SimulationConfig
from .invariants import Takeover, Violation
from .result import SimulationResult
from .world import World, simulate

__all__ = ["Premise", "SimulationConfig", "SimulationResult", "Takeover", "Violation", "World", "simulate"]
