"""Many seeds: run them (in worker processes if asked) and sum up what they found."""

from __future__ import annotations

import dataclasses
import multiprocessing
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from .config import SimulationConfig
from .result import SimulationResult
from .world import simulate

#: Reports kept in full (the rest of the failing seeds are listed by number).
KEPT_REPORTS = 5


@dataclass(slots=True)
class Worst:
    """The largest value seen, and the seed that gave it."""

    seconds: float = 0.0
    seed: int | None = None

    def offer(self, seconds: float, seed: int) -> None:
        if self.seed is None or seconds > self.seconds:
            self.seconds, self.seed = seconds, seed

    def merge(self, other: Worst) -> None:
        if other.seed is not None:
            self.offer(other.seconds, other.seed)

    def __str__(self) -> str:
        return "-" if self.seed is None else f"{self.seconds:.3f} s (seed {self.seed})"


@dataclass(slots=True)
class Summary:
    """What a batch of seeds injected and found."""

    seeds: int = 0
    events: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    call_faults: Counter[tuple[str, str]] = field(default_factory=Counter)
    hand_overs: Counter[str] = field(default_factory=Counter)  # runs per way of ending terms
    violations: Counter[str] = field(default_factory=Counter)
    failing_seeds: list[int] = field(default_factory=list)
    first_violation: dict[int, str] = field(default_factory=dict)  # failing seed -> kind of its first
    reports: list[str] = field(default_factory=list)
    takeovers: int = 0
    takeovers_checked: int = 0
    takeovers_unfinished: int = 0
    worst_takeover: Worst = field(default_factory=Worst)
    worst_checked_takeover: Worst = field(default_factory=Worst)
    recoveries: int = 0
    worst_recovery: Worst = field(default_factory=Worst)
    writes_accepted: int = 0
    writes_rejected: int = 0
    wall: float = 0.0

    def add(self, result: SimulationResult) -> None:
        seed = result.config.seed
        self.seeds += 1
        self.events += result.events
        self.faults.update(result.faults)
        self.call_faults.update(result.call_faults)
        self.hand_overs[result.hand_over] += 1
        self.writes_accepted += result.writes_accepted
        self.writes_rejected += result.writes_rejected
        if result.violations:
            self.violations.update(v.kind for v in result.violations)
            self.failing_seeds.append(seed)
            self.first_violation[seed] = result.violations[0].kind
            if len(self.reports) < KEPT_REPORTS:
                self.reports.append(result.report())
        for takeover in result.takeovers:
            self.takeovers += 1
            if takeover.seconds is None:
                self.takeovers_unfinished += 1
                continue
            self.worst_takeover.offer(takeover.seconds, seed)
            if takeover.checked:
                self.takeovers_checked += 1
                self.worst_checked_takeover.offer(takeover.seconds, seed)
        if result.recovery is not None:
            self.recoveries += 1
            self.worst_recovery.offer(result.recovery, seed)

    def merge(self, other: Summary) -> None:
        for name in (
            "seeds",
            "events",
            "takeovers",
            "takeovers_checked",
            "takeovers_unfinished",
            "recoveries",
            "writes_accepted",
            "writes_rejected",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.faults.update(other.faults)
        self.call_faults.update(other.call_faults)
        self.hand_overs.update(other.hand_overs)
        self.violations.update(other.violations)
        self.failing_seeds.extend(other.failing_seeds)
        self.first_violation.update(other.first_violation)
        self.reports.extend(other.reports[: max(0, KEPT_REPORTS - len(self.reports))])
        for name in ("worst_takeover", "worst_checked_takeover", "worst_recovery"):
            getattr(self, name).merge(getattr(other, name))

    @property
    def ok(self) -> bool:
        return not self.failing_seeds


def run_seeds(seeds: Sequence[int], template: SimulationConfig, *, jobs: int = 1) -> Summary:
    """Run ``template`` once per seed; with ``jobs`` > 1, in that many worker processes."""
    started = time.perf_counter()
    if jobs <= 1 or len(seeds) < 2:
        summary = _run_chunk(template, list(seeds))
    else:
        summary = Summary()
        chunks = [list(seeds[i :: jobs * 4]) for i in range(jobs * 4)]
        # spawn, not fork: the caller (a test run) may have threads that a fork would copy mid-flight
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            for part in pool.map(_run_chunk, [template] * len(chunks), chunks):
                summary.merge(part)
        summary.failing_seeds.sort()
    summary.wall = time.perf_counter() - started
    return summary


def _run_chunk(template: SimulationConfig, seeds: list[int]) -> Summary:
    summary = Summary()
    for seed in seeds:
        summary.add(simulate(dataclasses.replace(template, seed=seed)))
    return summary
