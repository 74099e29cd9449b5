"""Memory: the resident-set growth of one process whose engine holds 10,000 leases.

In a fresh worker, the engine starts and warms up (a first lock, a pool of
threads to acquire with); then it acquires the leases through
``engine.lock(name).acquire()`` and the RSS growth is read from
``/proc/self/status``. What the application keeps (the Lock objects) counts too:
it is the cost of holding. On the memory backend the "server's" rows are in the
process as well.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..peers.base import Env
from ..targets import SIMBA, Target
from ..workers import JobFailed, WorkerPool
from .common import Outcome, Profile, short_error, unique

HOLD_TTL = 60.0


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def hold_many(family: str, env: Env, count: int) -> dict[str, Any]:
    """Job: hold ``count`` leases in one engine; report the RSS growth."""
    from ..simba_subjects import bulk_threads, start_engine

    engine = start_engine(family, env, HOLD_TTL)
    prefix = unique("memory")
    threads = bulk_threads(family)
    try:
        with ThreadPoolExecutor(threads) as pool:
            warm = [engine.lock(f"{prefix}.warm.{i}") for i in range(threads)]
            # Released by term: a pool thread other than the one that acquired may release it.
            warm_terms = list(pool.map(lambda lock: lock.acquire(30), warm))
            list(pool.map(lambda lock, term: lock.release(term), warm, warm_terms))
            gc.collect()
            before = rss_kib()
            locks = [engine.lock(f"{prefix}.{i}") for i in range(count)]
            started = time.perf_counter()
            terms = list(pool.map(lambda lock: lock.acquire(30), locks))
            took = time.perf_counter() - started
            gc.collect()
            after = rss_kib()
            held = len(engine.held_terms())
            list(pool.map(lambda lock, term: lock.release(term), locks, terms))
        return {
            "leases": count,
            "held": held,
            "rss_delta_mib": (after - before) / 1024,
            "bytes_per_lease": (after - before) * 1024 / count,
            "rss_after_mib": after / 1024,
            "acquire_all_s": took,
            "threads": threads,
        }
    finally:
        engine.close()


def run(
    targets: list[Target], env: Env, profile: Profile, pool: WorkerPool, log: Callable[[str], None]
) -> list[Outcome]:
    outcomes = []
    for target in targets:
        if target.role != SIMBA:
            continue
        (worker,) = pool.fresh(1)
        try:
            values = worker.run(
                "benchmarks.scenarios.memory:hold_many",
                timeout=900,
                family=target.family,
                env=env,
                count=profile.memory_leases,
            )
            outcomes.append(Outcome(target.key, values))
            log(f"  memory {target.key}: {values['rss_delta_mib']:.1f} MiB for {values['held']} leases")
        except JobFailed as error:
            outcomes.append(Outcome(target.key, error=str(error)))
            log(f"  memory {target.key}: FAILED {short_error(error)}")
        finally:
            worker.stop()
    return outcomes
