"""What one run found and what it injected."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .config import SimulationConfig
from .invariants import Takeover, Violation

#: Violations a report lists (the rest are counted).
REPORTED_VIOLATIONS = 10


@dataclass(slots=True)
class SimulationResult:
    """What a run found and what it injected."""

    config: SimulationConfig
    violations: list[Violation]
    faults: Counter[str]
    takeovers: list[Takeover]
    events: int
    writes_accepted: int
    writes_rejected: int
    recovery: float | None  # seconds from the last fault's end until every name led (calm-tail runs)
    trace: list[str] = field(default_factory=list)  # at the first violation, else at the end
    #: (operation, effect) -> how many of its calls the network hit so
    call_faults: Counter[tuple[str, str]] = field(default_factory=Counter)
    hand_over: str = ""  # how the model backend ended terms in this run

    @property
    def ok(self) -> bool:
        return not self.violations

    def report(self) -> str:
        """Violations, the trace that led to the first one, and the command that replays it."""
        found = f"{len(self.violations)} violation(s) (hand-over: {self.hand_over})"
        lines = [f"seed {self.config.seed}: {found}"]
        lines += [f"  {v}" for v in self.violations[:REPORTED_VIOLATIONS]]
        lines.append(f"last {len(self.trace)} events:")
        lines += [f"  {line}" for line in self.trace]
        lines.append(f"replay: {self.config.replay_command()}")
        return "\n".join(lines)
