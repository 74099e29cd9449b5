"""What the scenarios share: the run's profile, unique names, and results of one target."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Profile:
    """How long and how often to measure; ``full`` is the reference, the others shrink it."""

    name: str
    rounds: int = 5
    warmup: int = 200
    iterations: int = 2000
    counted_cycles: int = 50
    contention_rounds: int = 3
    contention_seconds: float = 10.0
    keepalive_counts: tuple[int, ...] = (1, 100, 1000, 10000)
    peer_keepalive_max: int = 1000
    keepalive_calls: int = 10
    clean_trials: int = 5
    kill_trials: int = 3
    takeover_ttl: float = 3.0
    memory_leases: int = 10000
    #: The async scenario: contenders per row, acquisitions per waiter (at least the minimum in
    #: all), and a time budget per row that cuts a slow backend short (the table says so).
    async_counts: tuple[int, ...] = (1, 20, 200, 2000)
    async_per_waiter: int = 3
    async_min_acquisitions: int = 200
    async_budget: float = 30.0
    #: Independent names: threads (and raw clients) per row, seconds per row, and the lease of
    #: the issue's report (renewed every third of it: LEASE_DURATION 3, RENEW_INTERVAL 1).
    parallel_counts: tuple[int, ...] = (1, 4, 16, 64)
    parallel_seconds: float = 5.0
    parallel_ttl: float = 3.0
    #: Client CPU per cycle: blocks of this many cycles, engine and raw client alternating.
    cpu_blocks: int = 10
    cpu_block_cycles: int = 500
    ttl: float = 15.0


PROFILES = {
    "full": Profile("full"),
    "quick": Profile(
        "quick",
        rounds=3,
        warmup=50,
        iterations=300,
        counted_cycles=20,
        contention_rounds=1,
        contention_seconds=2.0,
        keepalive_counts=(1, 100, 1000, 10000),
        peer_keepalive_max=100,
        keepalive_calls=3,
        clean_trials=2,
        kill_trials=1,
        takeover_ttl=2.0,
        memory_leases=10000,
        async_per_waiter=2,
        async_min_acquisitions=100,
        async_budget=10.0,
        parallel_seconds=2.0,
        cpu_blocks=6,
        cpu_block_cycles=200,
    ),
    # For the test suite: every scenario runs, each as briefly as it can still mean something.
    "smoke": Profile(
        "smoke",
        rounds=2,
        warmup=10,
        iterations=50,
        counted_cycles=5,
        contention_rounds=1,
        contention_seconds=0.5,
        keepalive_counts=(1, 100, 1000),
        peer_keepalive_max=100,
        keepalive_calls=2,
        clean_trials=1,
        kill_trials=1,
        takeover_ttl=1.5,
        memory_leases=1000,
        async_counts=(1, 20),
        async_per_waiter=2,
        async_min_acquisitions=20,
        async_budget=2.0,
        parallel_counts=(1, 4),
        parallel_seconds=0.5,
        cpu_blocks=2,
        cpu_block_cycles=20,
    ),
}


def unique(prefix: str) -> str:
    """A lease name no earlier run used (servers keep tokens of old names forever)."""
    return f"bench.{prefix}.{uuid.uuid4().hex[:10]}"


@dataclass
class Outcome:
    """One target's result in one scenario: measured values, or why there are none."""

    target: str
    values: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"target": self.target, **self.values, **({"error": self.error} if self.error else {})}


def short_error(error: BaseException) -> str:
    """The last line of a worker's traceback (the whole of it goes to the JSON)."""
    text = str(error).strip().splitlines()
    return text[-1][:200] if text else type(error).__name__
