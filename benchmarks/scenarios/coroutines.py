"""Many coroutines of one process contending one name (``alock``), beside as many threads on ``lock()``.

One worker process, one engine, one name. For each N in the profile's counts, N
contenders (coroutines of one event loop, or threads) each loop on acquire and
release with nothing in between, starting together. A run stops after
``acquisitions_per_waiter`` x N acquisitions in all (at least
``min_acquisitions``), or when its time budget is spent, whichever comes first;
a fair line then gives every waiter about the same count (one fewer for those
the cut falls on). What is left waiting is cancelled (coroutines) or woken by
closing the engine (threads); that part is not timed.

Measured per row: the total time up to the cut; the hand-off, from the instant a
holder calls release to the next acquisition returning (p50 / p99); the
process's threads while the contenders wait (the peak of ``/proc/self/status``
``Threads`` and of ``threading.active_count()``, sampled every 10 ms, and the
count before the contenders started); least / most acquisitions of a waiter;
overlaps (an acquisition while another contender believes it holds: must be 0).
Each row is run ``contention_rounds`` times (the modes' order alternating), each
time in a fresh process: the table shows the median timings, the most threads,
and the least fair round.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from ..peers.base import Env
from ..stats import median, percentile, rotated
from ..targets import SIMBA, Target
from ..workers import JobFailed, WorkerPool
from .common import Outcome, Profile, short_error, unique

MODES = ("async", "threads")
SAMPLE_EVERY = 0.01


def os_threads() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise RuntimeError("no Threads in /proc/self/status")


class _Run:
    """What the contenders of one run share (one process: plain attributes are enough)."""

    def __init__(self, count: int, quota: int, budget: float) -> None:
        self.quota = quota
        self.budget = budget
        self.counts = [0] * count
        self.handoffs: list[int] = []
        self.holder: int | None = None
        self.last: int | None = None
        self.released_at: int | None = None
        self.overlaps = 0
        self.total = 0
        self.stop = False
        self.started = 0
        self.ended = 0
        self.peak_os = 0
        self.peak_python = 0
        self.mutex = threading.Lock()  # threads: the bookkeeping of an acquisition is one step

    def acquired(self, who: int) -> None:
        now = time.perf_counter_ns()
        if self.holder is not None:
            self.overlaps += 1
        self.holder = who
        if self.stop:  # past the cut: checked for overlaps, not counted
            return
        # A hand-off when the holder changes; with one contender, its own next acquisition.
        if self.released_at is not None and (who != self.last or len(self.counts) == 1):
            self.handoffs.append(now - self.released_at)
        self.last = who
        self.counts[who] += 1
        self.total += 1
        if self.total >= self.quota or now - self.started >= self.budget * 1e9:
            self.stop = True
            self.ended = now

    def releasing(self) -> None:
        self.holder = None
        self.released_at = time.perf_counter_ns()

    def sample(self) -> None:
        self.peak_os = max(self.peak_os, os_threads())
        self.peak_python = max(self.peak_python, threading.active_count())

    def summary(self, mode: str, count: int, baseline: tuple[int, int], drain_s: float) -> dict[str, Any]:
        counts, handoffs = self.counts, self.handoffs
        most = max(counts)
        return {
            "mode": mode,
            "n": count,
            "acquisitions": self.total,
            "quota": self.quota,
            "cut_by_budget": self.total < self.quota,
            "total_s": (self.ended - self.started) / 1e9,
            "handoff_p50_us": percentile(handoffs, 0.5) / 1000 if handoffs else float("nan"),
            "handoff_p99_us": percentile(handoffs, 0.99) / 1000 if handoffs else float("nan"),
            "threads_before": baseline[0],
            "threads_peak": self.peak_os,
            "python_threads_before": baseline[1],
            "python_threads_peak": self.peak_python,
            "least": min(counts),
            "most": most,
            "fairness": min(counts) / most if most else 0.0,
            "overlaps": self.overlaps,
            "drain_s": drain_s,
        }


def _quota(count: int, per_waiter: int, least: int) -> int:
    return max(per_waiter * count, least)


async def _coroutines(engine: Any, name: str, count: int, run: _Run) -> float:
    start = asyncio.Event()

    async def contender(who: int) -> None:
        lock = engine.alock(name)
        await start.wait()
        while not run.stop:
            await lock.acquire(None)
            run.acquired(who)
            run.releasing()
            await lock.release()

    tasks = [asyncio.create_task(contender(who)) for who in range(count)]
    await asyncio.sleep(0)  # every contender waits for the start
    run.sample()
    run.started = time.perf_counter_ns()
    start.set()
    while not run.stop:
        run.sample()
        await asyncio.sleep(SAMPLE_EVERY)
    drained = time.perf_counter()
    for task in tasks:
        task.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    failures = [
        r for r in results if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)
    ]
    if failures:
        raise failures[0]
    return time.perf_counter() - drained


def _threads(engine: Any, name: str, count: int, run: _Run) -> float:
    from django_simba.errors import EngineClosed

    start = threading.Event()
    errors: list[BaseException] = []

    def contender(who: int) -> None:
        lock = engine.lock(name)
        start.wait()
        try:
            while not run.stop:
                lock.acquire(run.budget + 60)
                with run.mutex:
                    run.acquired(who)
                    run.releasing()
                lock.release()
        except EngineClosed:
            pass
        except BaseException as error:  # reported by the job
            errors.append(error)

    threads = [threading.Thread(target=contender, args=(who,), daemon=True) for who in range(count)]
    for thread in threads:
        thread.start()
    run.sample()
    run.started = time.perf_counter_ns()
    start.set()
    while not run.stop and not errors:
        run.sample()
        time.sleep(SAMPLE_EVERY)
    drained = time.perf_counter()
    engine.close()  # whoever still waits wakes with EngineClosed
    for thread in threads:
        thread.join(60)
    if errors:
        raise errors[0]
    return time.perf_counter() - drained


def contend(
    family: str, env: Env, mode: str, count: int, quota: int, budget: float, ttl: float
) -> dict[str, Any]:
    """Job: ``count`` contenders of one mode on one fresh engine and name; the row's figures."""
    from ..simba_subjects import start_engine

    engine = start_engine(family, env, ttl)
    name = unique(f"async.{mode}.{count}")
    try:
        warm = engine.lock(name)  # the first acquisition of a name costs more on some backends
        warm.acquire(30)
        warm.release()
        run = _Run(count, quota, budget)
        baseline = (os_threads(), threading.active_count())
        if mode == "async":
            drain = asyncio.run(_coroutines(engine, name, count, run))
        else:
            drain = _threads(engine, name, count, run)
        return run.summary(mode, count, baseline, drain)
    finally:
        engine.close()


def _row(worker: Any, target: Target, env: Env, profile: Profile, mode: str, count: int) -> dict[str, Any]:
    quota = _quota(count, profile.async_per_waiter, profile.async_min_acquisitions)
    row: dict[str, Any] = worker.run(
        "benchmarks.scenarios.coroutines:contend",
        timeout=profile.async_budget + 180,
        family=target.family,
        env=env,
        mode=mode,
        count=count,
        quota=quota,
        budget=profile.async_budget,
        ttl=profile.ttl,
    )
    return row


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of the table from the rounds of one (mode, N): medians of the timings, the worst of
    the rest (the most threads, the least fair round, every overlap)."""
    first = rounds[0]
    return {
        "mode": first["mode"],
        "n": first["n"],
        "quota": first["quota"],
        "acquisitions": int(median([r["acquisitions"] for r in rounds])),
        "cut_by_budget": any(r["cut_by_budget"] for r in rounds),
        "total_s": median([r["total_s"] for r in rounds]),
        "handoff_p50_us": median([r["handoff_p50_us"] for r in rounds]),
        "handoff_p99_us": median([r["handoff_p99_us"] for r in rounds]),
        "threads_before": max(r["threads_before"] for r in rounds),
        "threads_peak": max(r["threads_peak"] for r in rounds),
        "python_threads_peak": max(r["python_threads_peak"] for r in rounds),
        **min(
            ({k: r[k] for k in ("least", "most", "fairness")} for r in rounds), key=lambda f: f["fairness"]
        ),
        "overlaps": sum(r["overlaps"] for r in rounds),
        "rounds": rounds,
    }


def run(
    targets: list[Target], env: Env, profile: Profile, pool: WorkerPool, log: Callable[[str], None]
) -> list[Outcome]:
    targets = [target for target in targets if target.role == SIMBA]
    outcomes = []
    for target in targets:
        measured: dict[tuple[str, int], list[dict[str, Any]]] = {}
        failures: list[str] = []
        for turn in range(profile.contention_rounds):
            for count in profile.async_counts:
                for mode in rotated(MODES, turn + count):
                    assert isinstance(mode, str)
                    # A fresh process per row: the thread count of one row owes nothing to the last.
                    (worker,) = pool.fresh(1)
                    try:
                        row = _row(worker, target, env, profile, mode, count)
                        measured.setdefault((mode, count), []).append(row)
                        log(
                            f"  async {target.family} {mode} N={count}: {row['acquisitions']} acq in "
                            f"{row['total_s']:.2f} s, hand-off p50 {row['handoff_p50_us']:.0f} µs, "
                            f"threads {row['threads_before']} -> {row['threads_peak']}"
                        )
                    except (JobFailed, TimeoutError) as error:
                        failures.append(f"{mode} N={count}: {error}")
                        log(f"  async {target.family} {mode} N={count}: FAILED {short_error(error)}")
                    finally:
                        with contextlib.suppress(Exception):
                            worker.stop()
        rows = [
            combine(measured[(mode, count)])
            for count in profile.async_counts
            for mode in MODES
            if (mode, count) in measured
        ]
        outcomes.append(
            Outcome(
                target.key,
                {"rows": rows, "failures": failures, "budget_s": profile.async_budget},
                error=None if rows else (failures[-1] if failures else "no row measured"),
            )
        )
    return outcomes
