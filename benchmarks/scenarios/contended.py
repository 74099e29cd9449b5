"""Several processes contending for one name: throughput, hand-offs, fairness, and mutual exclusion.

Each process loops on a blocking acquire and a release with nothing in between.
While it believes it holds the lock it fills a shared "holder" slot; finding the
slot already filled is an overlap (mutual exclusion broken; must be 0). A
hand-off is an acquisition by another process than the previous holder. The
processes start together on a shared monotonic timestamp and count only what
they acquired before the end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..peers.base import Env, LockClient
from ..shared import Slots
from ..stats import median, rotated
from ..targets import Target, build
from ..workers import JobFailed, WorkerPool
from .common import Outcome, Profile, short_error, unique

PROCESSES = 4
HOLDER, LAST, START = 0, 1, 2
READY = 3  # READY + index: that contender is set up


def _contend_loop(client: LockClient, slots: Slots, index: int, duration: float) -> dict[str, int]:
    clock = time.monotonic_ns
    slots[READY + index] = 1
    start = slots.wait_for(START, 300)
    while clock() < start:
        time.sleep(0.0002)
    end = start + int(duration * 1e9)
    me = index + 1
    acquisitions = handoffs = overlaps = 0
    while clock() < end:
        if not client.acquire(None):
            continue
        if slots[HOLDER] != 0:
            overlaps += 1
        slots[HOLDER] = me
        if clock() < end:
            acquisitions += 1
            last = slots[LAST]
            if last and last != me:
                handoffs += 1
            slots[LAST] = me
        slots[HOLDER] = 0
        client.release()
    return {"acquisitions": acquisitions, "handoffs": handoffs, "overlaps": overlaps}


def _warm(client: LockClient) -> None:
    if client.acquire(None):
        client.release()


def contend(
    lock: Any, env: Env, name: str, ttl: float, slots: str, index: int, duration: float
) -> dict[str, int]:
    """Job: one contending process."""
    shared = Slots.attach(slots)
    client = build(lock)(env, name, ttl)
    try:
        _warm(client)
        return _contend_loop(client, shared, index, duration)
    finally:
        client.close()
        shared.close()


def contend_threads(lock: Any, env: Env, name: str, ttl: float, processes: int, duration: float) -> list[Any]:
    """Job: contenders as threads of one process (the in-process memory backend)."""
    clients = [build(lock)(env, name, ttl) for _ in range(processes)]
    shared = Slots.create(READY + processes)
    results: list[Any] = [None] * processes

    def contender(index: int) -> None:
        _warm(clients[index])
        results[index] = _contend_loop(clients[index], shared, index, duration)

    threads = [threading.Thread(target=contender, args=(i,), daemon=True) for i in range(processes)]
    try:
        for thread in threads:
            thread.start()
        for index in range(processes):
            shared.wait_for(READY + index, 60)
        shared[START] = time.monotonic_ns() + 20_000_000
        for thread in threads:
            thread.join(duration + 60)
        return results
    finally:
        for client in clients:
            client.close()
        shared.close()


def _one_round(target: Target, env: Env, profile: Profile, pool: WorkerPool) -> list[dict[str, int]]:
    name = unique("contended")
    duration = profile.contention_seconds
    if target.in_process:
        (worker,) = pool.get(1)
        results: list[dict[str, int]] = worker.run(
            "benchmarks.scenarios.contended:contend_threads",
            timeout=duration + 120,
            lock=target.lock,
            env=env,
            name=name,
            ttl=profile.ttl,
            processes=PROCESSES,
            duration=duration,
        )
        return results
    workers = pool.get(PROCESSES)
    shared = Slots.create(READY + PROCESSES)
    try:
        for index, worker in enumerate(workers):
            worker.submit(
                "benchmarks.scenarios.contended:contend",
                lock=target.lock,
                env=env,
                name=name,
                ttl=profile.ttl,
                slots=shared.name,
                index=index,
                duration=duration,
            )
        for index in range(PROCESSES):
            try:
                shared.wait_for(READY + index, 120)
            except TimeoutError:
                if workers[index].conn.poll():
                    workers[index].result(1)  # raises with the worker's traceback
                raise
        shared[START] = time.monotonic_ns() + 50_000_000
        return [worker.result(duration + 120) for worker in workers]
    except BaseException:
        for worker in workers:
            if worker.busy:
                worker.kill()
        raise
    finally:
        shared.close()


def summarize(per_process: list[dict[str, int]], duration: float) -> dict[str, Any]:
    counts = [p["acquisitions"] for p in per_process]
    return {
        "acq_per_s": sum(counts) / duration,
        "handoffs_per_s": sum(p["handoffs"] for p in per_process) / duration,
        "min": min(counts),
        "max": max(counts),
        "fairness": (min(counts) / max(counts)) if max(counts) else 0.0,
        "overlaps": sum(p["overlaps"] for p in per_process),
        "per_process": counts,
    }


def run(
    targets: list[Target], env: Env, profile: Profile, pool: WorkerPool, log: Callable[[str], None]
) -> list[Outcome]:
    targets = [target for target in targets if target.contends and target.lock is not None]
    rounds: dict[str, list[dict[str, Any]]] = {target.key: [] for target in targets}
    failures: dict[str, list[str]] = {target.key: [] for target in targets}
    for turn in range(profile.contention_rounds):
        for target in rotated(targets, turn):
            assert isinstance(target, Target)
            try:
                per_process = _one_round(target, env, profile, pool)
                rounds[target.key].append(summarize(per_process, profile.contention_seconds))
                log(f"  contended {target.key}: {rounds[target.key][-1]['per_process']}")
            except (JobFailed, TimeoutError) as error:  # recorded; the next rounds try again
                failures[target.key].append(str(error))
                log(f"  contended {target.key}: round FAILED {short_error(error)}")
    outcomes = []
    for target in targets:
        done = rounds[target.key]
        if not done:
            outcomes.append(Outcome(target.key, error=failures[target.key][-1]))
            continue
        outcomes.append(
            Outcome(
                target.key,
                {
                    "acq_per_s": median([r["acq_per_s"] for r in done]),
                    "handoffs_per_s": median([r["handoffs_per_s"] for r in done]),
                    "min": median([r["min"] for r in done]),
                    "max": median([r["max"] for r in done]),
                    "fairness": median([r["fairness"] for r in done]),
                    "overlaps": sum(r["overlaps"] for r in done),
                    "seconds": profile.contention_seconds,
                    "rounds": done,
                    "failures": failures[target.key],
                },
            )
        )
    return outcomes
