"""Uncontended acquire + release: one process, one name, nobody else wants it.

Every round builds the subject afresh in its worker, runs warm-up cycles, then
timed cycles (p50 / p99 of each cycle, operations per second over the whole
loop), then a few cycles with the round-trip counters on. The table gives the
median of the rounds; the targets' order rotates every round.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..peers.base import Env
from ..stats import median, percentile, rotated
from ..targets import Target, build
from ..workers import JobFailed, WorkerPool
from .common import Outcome, Profile, short_error, unique


def cycles(
    lock: Any, env: Env, name: str, ttl: float, warmup: int, iterations: int, counted: int
) -> dict[str, Any]:
    """Job: time ``iterations`` acquire + release cycles of one fresh client."""
    from ..counting import counting

    client = build(lock)(env, name, ttl)
    try:

        def cycle() -> None:
            if not client.acquire(0):
                raise RuntimeError(f"uncontended acquire of {name!r} was refused")
            client.release()

        for _ in range(warmup):
            cycle()
        clock = time.perf_counter_ns
        latencies = []
        started = clock()
        for _ in range(iterations):
            before = clock()
            cycle()
            latencies.append(clock() - before)
        elapsed = clock() - started
        result: dict[str, Any] = {
            "p50_us": percentile(latencies, 0.50) / 1000,
            "p99_us": percentile(latencies, 0.99) / 1000,
            "ops": iterations / (elapsed / 1e9),
        }
        if counted:
            with counting() as counts:
                for _ in range(counted):
                    cycle()
            result["rt"] = counts["rt"] / counted
            result["connects"] = counts["connects"] / counted
        return result
    finally:
        client.close()


def run(
    targets: list[Target], env: Env, profile: Profile, pool: WorkerPool, log: Callable[[str], None]
) -> list[Outcome]:
    targets = [target for target in targets if target.lock is not None]
    workers = dict(zip([t.key for t in targets], pool.get(len(targets))))
    rounds: dict[str, list[dict[str, Any]]] = {target.key: [] for target in targets}
    failures: dict[str, list[str]] = {target.key: [] for target in targets}
    for turn in range(profile.rounds):
        for target in rotated(targets, turn):
            assert isinstance(target, Target)
            counted_already = any("rt" in done for done in rounds[target.key])
            if not workers[target.key].process.is_alive():
                workers[target.key] = pool.replace(workers[target.key])
            try:
                rounds[target.key].append(
                    workers[target.key].run(
                        "benchmarks.scenarios.uncontended:cycles",
                        timeout=120 + profile.iterations * 0.05,
                        lock=target.lock,
                        env=env,
                        name=unique("uncontended"),
                        ttl=profile.ttl,
                        warmup=profile.warmup,
                        iterations=profile.iterations,
                        counted=0 if counted_already else profile.counted_cycles,
                    )
                )
            except JobFailed as error:  # recorded; the next rounds try again
                failures[target.key].append(str(error))
                log(f"  uncontended {target.key}: round FAILED {short_error(error)}")
        log(f"  uncontended round {turn + 1}/{profile.rounds} done")
    outcomes = []
    for target in targets:
        done = rounds[target.key]
        if not done:
            outcomes.append(Outcome(target.key, error=failures[target.key][-1]))
            continue
        counted = next((r for r in done if "rt" in r), {})
        outcomes.append(
            Outcome(
                target.key,
                {
                    "p50_us": median([r["p50_us"] for r in done]),
                    "p99_us": median([r["p99_us"] for r in done]),
                    "ops": median([r["ops"] for r in done]),
                    "rt": counted.get("rt"),
                    "connects": counted.get("connects"),
                    "rounds": done,
                    "failures": failures[target.key],
                },
            )
        )
    return outcomes
