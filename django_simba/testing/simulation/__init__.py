"""A deterministic simulation of a cluster of engines over the model backend (design: Proof; docs/proof.rst).

Several processes, each a real :class:`~django_simba.engine.Engine` on its own
drifting clock, share one virtual world clock, one event heap and the in-memory
backend, which frees released names or hands them over as Redis or ZooKeeper do; a
simulated network loses, resets and delays every call. A seed decides every fault,
forks without fork hooks, session evictions and an operator's force releases
included. Some processes share one lock object between threads and one between tasks
(on an asyncio loop of their own clock). After every event an oracle checks that at
most one process believes it holds a name, that tokens only increase and no two
terms share one, that a fenced register never accepts a superseded write, that a
crashed leader is replaced in time, and that no caller of a shared handle ends,
misreports or waits on another caller's term.

Run it with ``python -m django_simba.testing.simulation --seeds 1000``, replay one
seed with ``--seed N --trace``; ``docs/proof.rst`` says what each fault and
invariant means.
"""

from .config import Premise, SimulationConfig
from .invariants import Takeover, Violation
from .result import SimulationResult
from .world import World, simulate

__all__ = ["Premise", "SimulationConfig", "SimulationResult", "Takeover", "Violation", "World", "simulate"]
