"""Take-over: how long a waiting candidate needs to lead after the leader stands down or dies.

Two processes: A leads, B waits. *Clean*: A stamps the monotonic clock and
stands down the subject's own way (django-simba: ``election.close()``). *Kill*:
the parent stamps the clock and sends A SIGKILL at a random point of its renew
cycle. B stamps the clock in its ``on_elected`` callback. Both clocks are the
host's CLOCK_MONOTONIC. Leases / sessions / TTLs are ``takeover_ttl`` seconds
for every subject (django-simba renews every third of it).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from ..peers.base import Env
from ..shared import Slots
from ..stats import median, rotated
from ..targets import Target, build
from ..workers import JobFailed, Worker, WorkerPool
from .common import Outcome, Profile, short_error, unique

ELECTED, STOOD_DOWN, COMMAND, READY = 0, 1, 2, 3
STAND_DOWN, CLOSE = 1, 2
#: Time for B to be seen waiting (its first attempt refused, its watch set) before A goes.
SETTLE = 0.5


def _slot(index: int, what: int) -> int:
    return 4 * index + what


def candidate(ref: Any, env: Env, name: str, ttl: float, slots: str, index: int) -> None:
    """Job: one candidate; follows the parent's commands through the shared slots."""
    shared = Slots.attach(slots)
    subject = build(ref)(env, name, ttl)

    def elected() -> None:
        if shared[_slot(index, ELECTED)] == 0:
            shared[_slot(index, ELECTED)] = time.monotonic_ns()

    try:
        subject.start(elected)
        shared[_slot(index, READY)] = 1
        stood_down = False
        while True:
            command = shared[_slot(index, COMMAND)]
            if command == STAND_DOWN and not stood_down:
                shared[_slot(index, STOOD_DOWN)] = time.monotonic_ns()
                subject.stand_down()
                stood_down = True
            elif command == CLOSE:
                return
            time.sleep(0.0005)
    finally:
        subject.close()
        shared.close()


def in_process(ref: Any, env: Env, name: str, ttl: float) -> float:
    """Job: a clean take-over between two candidates of one process (the memory backend)."""
    a, b = build(ref)(env, name, ttl), build(ref)(env, name, ttl)
    shared = Slots.create(8)
    try:
        a.start(lambda: shared.__setitem__(_slot(0, ELECTED), time.monotonic_ns()))
        shared.wait_for(_slot(0, ELECTED), 30)
        b.start(lambda: shared.__setitem__(_slot(1, ELECTED), time.monotonic_ns()))
        time.sleep(SETTLE)
        stood_down = time.monotonic_ns()
        a.stand_down()
        return (shared.wait_for(_slot(1, ELECTED), ttl * 4 + 10) - stood_down) / 1e6
    finally:
        a.close()
        b.close()
        shared.close()


def _trial(target: Target, env: Env, ttl: float, kill: bool, pool: WorkerPool) -> float:
    """One take-over in milliseconds."""
    a, b = pool.get(2)
    shared = Slots.create(8)
    name = unique("takeover")
    started: list[Worker] = []
    try:
        for index, worker in enumerate((a, b)):
            worker.submit(
                "benchmarks.scenarios.takeover:candidate",
                ref=target.candidate,
                env=env,
                name=name,
                ttl=ttl,
                slots=shared.name,
                index=index,
            )
            started.append(worker)
            _wait(shared, _slot(index, ELECTED if index == 0 else READY), worker, 60)
        time.sleep(SETTLE + (random.uniform(0, ttl / 3) if kill else 0))
        if shared[_slot(1, ELECTED)]:
            raise RuntimeError("B was elected while A still led")
        if kill:
            gone = time.monotonic_ns()
            a.kill()
        else:
            shared[_slot(0, COMMAND)] = STAND_DOWN
        elected = _wait(shared, _slot(1, ELECTED), b, ttl * 4 + 15)
        if not kill:
            gone = shared.wait_for(_slot(0, STOOD_DOWN), 5)
        for index in (0, 1):
            shared[_slot(index, COMMAND)] = CLOSE
        for worker in started:
            if worker.process.is_alive():
                worker.result(30)
        return (elected - gone) / 1e6
    except BaseException:
        for worker in started:
            if worker.busy:
                worker.kill()
        raise
    finally:
        shared.close()


def _wait(shared: Slots, slot: int, worker: Worker, timeout: float) -> int:
    """Wait for a slot, failing early with the worker's traceback if its job ended."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return shared.wait_for(slot, min(1.0, max(0.01, deadline - time.monotonic())))
        except TimeoutError:
            if worker.conn.poll():
                worker.result(1)
                raise RuntimeError("the candidate's job ended early") from None
            if time.monotonic() > deadline:
                raise


def run(
    targets: list[Target], env: Env, profile: Profile, pool: WorkerPool, log: Callable[[str], None]
) -> list[Outcome]:
    targets = [target for target in targets if target.candidate is not None]
    ttl = profile.takeover_ttl
    results: dict[str, dict[str, list[float]]] = {t.key: {"clean": [], "kill": []} for t in targets}
    errors: dict[str, str] = {}
    plan = [("clean", turn) for turn in range(profile.clean_trials)]
    plan += [("kill", turn) for turn in range(profile.kill_trials)]
    for kind, turn in plan:
        for target in rotated(targets, turn):
            assert isinstance(target, Target)
            if target.key in errors or (kind == "kill" and target.in_process):
                continue
            try:
                if target.in_process:
                    (worker,) = pool.get(1)
                    took = worker.run(
                        "benchmarks.scenarios.takeover:in_process",
                        timeout=ttl * 4 + 60,
                        ref=target.candidate,
                        env=env,
                        name=unique("takeover"),
                        ttl=ttl,
                    )
                else:
                    took = _trial(target, env, ttl, kind == "kill", pool)
                results[target.key][kind].append(took)
                log(f"  take-over {kind} {target.key}: {took:.1f} ms")
            except (JobFailed, TimeoutError, RuntimeError) as error:
                errors[target.key] = f"{kind}: {error}"
                log(f"  take-over {kind} {target.key}: FAILED {short_error(error)}")
    outcomes = []
    for target in targets:
        found = results[target.key]
        values: dict[str, Any] = {"ttl": ttl, "clean_ms": found["clean"], "kill_ms": found["kill"]}
        for kind in ("clean", "kill"):
            if found[kind]:
                values[f"{kind}_median_ms"] = median(found[kind])
                values[f"{kind}_max_ms"] = max(found[kind])
        outcomes.append(Outcome(target.key, values, error=errors.get(target.key)))
    return outcomes
