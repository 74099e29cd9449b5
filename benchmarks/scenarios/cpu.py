"""Client CPU per uncontended cycle: the engine, its backend alone (SPI), and the raw client.

One worker process per backend holds all three subjects at once, each on a name of its own,
and runs blocks of ``cpu_block_cycles`` acquire + release cycles of one subject after the
other, in rotation, ``cpu_blocks`` times. A block's cost is ``time.process_time`` over it:
every thread of the process, so the engine's timer and keep-alive threads, a listener, the
drivers' own threads and those of the subjects idle meanwhile are all counted, as they are
on an application server. Alternating blocks in one process puts the three under the same
load of the machine. The table gives the median block of each subject, per cycle.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..peers.base import Env
from ..stats import median
from ..targets import FLOOR, SIMBA, SPI, Target, build
from ..workers import JobFailed, WorkerPool
from .common import Outcome, Profile, short_error, unique


def cpu_blocks(subjects: dict[str, Any], env: Env, ttl: float, blocks: int, cycles: int) -> dict[str, Any]:
    """Job: ``blocks`` rotations of a block of ``cycles`` cycles per subject; CPU µs per cycle."""
    clients = {
        key: build(ref)(env, unique(f"cpu.{index}"), ttl) for index, (key, ref) in enumerate(subjects.items())
    }
    try:
        for client in clients.values():  # warm: first acquires, prepared statements, scripts
            for _ in range(max(10, cycles // 10)):
                _cycle(client)
        costs: dict[str, list[float]] = {key: [] for key in clients}
        for block in range(blocks):
            keys = list(clients)
            for key in keys[block % len(keys) :] + keys[: block % len(keys)]:
                client = clients[key]
                before = time.process_time()
                for _ in range(cycles):
                    _cycle(client)
                costs[key].append((time.process_time() - before) / cycles * 1e6)
        return {key: {"cpu_us": median(values), "blocks": values} for key, values in costs.items()}
    finally:
        for client in clients.values():
            client.close()


def _cycle(client: Any) -> None:
    if not client.acquire(0):
        raise RuntimeError("an uncontended acquire was refused")
    client.release()


def run(
    targets: list[Target], env: Env, profile: Profile, pool: WorkerPool, log: Callable[[str], None]
) -> list[Outcome]:
    outcomes = []
    for target in [t for t in targets if t.role == SIMBA]:
        family = [t for t in targets if t.family == target.family and t.role in (SIMBA, SPI, FLOOR)]
        subjects = {t.key: t.lock for t in family if t.lock is not None}
        (worker,) = pool.get(1)
        if not worker.process.is_alive():
            worker = pool.replace(worker)
        try:
            measured = worker.run(
                "benchmarks.scenarios.cpu:cpu_blocks",
                timeout=300 + profile.cpu_blocks * profile.cpu_block_cycles * len(subjects) * 0.05,
                subjects=subjects,
                env=env,
                ttl=profile.ttl,
                blocks=profile.cpu_blocks,
                cycles=profile.cpu_block_cycles,
            )
        except JobFailed as error:
            log(f"  cpu {target.family}: FAILED {short_error(error)}")
            outcomes.append(Outcome(target.key, error=str(error)))
            continue
        log("  cpu " + ", ".join(f"{key}: {value['cpu_us']:.0f} µs" for key, value in measured.items()))
        outcomes.append(Outcome(target.key, {"subjects": measured}))
    return outcomes
