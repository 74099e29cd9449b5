"""Independent names in parallel: N threads of one process, each cycling a name of its own.

What a threaded web server does: no contention at all, only a process's threads sharing its
engine and its backend. For each N, three subjects run in turn, each in one worker process
with N threads that loop on acquire + release of their own name (one warm-up cycle each,
then a start together):

* ``django-simba``: one engine (lease = ttl, renew = ttl/3, the issue's 3 s / 1 s), N
  ``engine.lock(name)``, the backend's defaults (the database pool: ``max_connections`` 2);
* ``django-simba, pool = N`` (databases only): the same with ``max_connections`` = N, so the
  pool bounds nothing;
* ``raw``: N raw floor clients (``peers/raw.py``), each on a connection of its own.

Measured over ``parallel_seconds``: cycles per second, errors (any exception of a thread; a
refused uncontended acquire of a raw client; every session the engine lost), and the client
CPU per cycle (``time.process_time``: every thread of the process, the engine's own and the
drivers' included). The table gives the median of the rounds; the errors are summed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..peers.base import Env
from ..stats import median, rotated
from ..targets import FLOOR, SIMBA, Target, build
from ..workers import JobFailed, WorkerPool
from .common import Outcome, Profile, short_error, unique

ENGINE, ENGINE_POOL, RAW = "django-simba", "django-simba, pool = N", "raw"
DATABASES = ("postgresql", "mysql", "sqlite")
#: An engine acquire of a free name waits at most this long (an error if it has to).
ACQUIRE_TIMEOUT = 10.0


class _Tally:
    """Cycles and errors of the threads, counted until the stop."""

    def __init__(self, count: int) -> None:
        self.cycles = [0] * count
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.start = threading.Barrier(count + 1)
        self.mutex = threading.Lock()

    def failed(self, error: BaseException | str) -> None:
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        with self.mutex:
            self.errors.append(text[:300])


def _warm_then_loop(cycle: Callable[[], None], index: int, tally: _Tally) -> None:
    """One cycle to warm up (a name's first acquire costs more), then cycles until the stop.

    Every error counts, and the loop goes on: what the table shows is how many there were.
    """
    try:
        cycle()
    except Exception as error:
        tally.failed(error)
    tally.start.wait()
    while not tally.stop.is_set():
        try:
            cycle()
        except Exception as error:
            tally.failed(error)
            continue
        tally.cycles[index] += 1


def _engine_cycles(
    family: str, env: Env, names: list[str], ttl: float, pool: int | None, tally: _Tally
) -> Any:
    from django_simba.engine import EngineObserver

    from ..simba_subjects import start_engine

    class SessionsLost(EngineObserver):
        def session_lost(self, session_id: str, reason: Any) -> None:
            tally.failed(f"session lost: {reason}")

    engine = start_engine(family, env, ttl, pool=pool)
    engine.observers = [SessionsLost()]

    def loop(index: int) -> None:
        lock = engine.lock(names[index])

        def cycle() -> None:
            lock.acquire(ACQUIRE_TIMEOUT)
            lock.release()

        _warm_then_loop(cycle, index, tally)

    return engine, loop


def _raw_cycles(lock: Any, env: Env, names: list[str], ttl: float, tally: _Tally) -> Any:
    def loop(index: int) -> None:
        client = build(lock)(env, names[index], ttl)  # in its thread: sqlite3 wants that

        def cycle() -> None:
            if not client.acquire(0):
                raise RuntimeError("a free name was refused")
            client.release()

        try:
            _warm_then_loop(cycle, index, tally)
        finally:
            client.close()

    return loop


def names_in_parallel(
    family: str, subject: str, env: Env, count: int, seconds: float, ttl: float, raw: Any = None
) -> dict[str, Any]:
    """Job: ``count`` threads each cycling a name of its own for ``seconds``; the row's figures."""
    names = [unique(f"parallel.{count}.{index}") for index in range(count)]
    tally = _Tally(count)
    engine = None  # raw clients close in their own threads
    if subject == RAW:
        loop = _raw_cycles(raw, env, names, ttl, tally)
    else:
        pool = count if subject == ENGINE_POOL else None
        engine, loop = _engine_cycles(family, env, names, ttl, pool, tally)
    threads = [threading.Thread(target=loop, args=(index,), daemon=True) for index in range(count)]
    try:
        for thread in threads:
            thread.start()
        tally.start.wait(120)
        cpu, started = time.process_time(), time.perf_counter()
        tally.stop.wait(seconds)
        cycles, cpu, elapsed = sum(tally.cycles), time.process_time() - cpu, time.perf_counter() - started
        tally.stop.set()
        for thread in threads:
            thread.join(ACQUIRE_TIMEOUT + 30)
    finally:
        tally.stop.set()
        if engine is not None:
            engine.close()
    return {
        "subject": subject,
        "n": count,
        "ops": cycles / elapsed,
        "cpu_us": cpu / cycles * 1e6 if cycles else float("nan"),
        "errors": len(tally.errors),
        "first_error": tally.errors[0] if tally.errors else None,
        "least": min(tally.cycles),
        "most": max(tally.cycles),
    }


def subjects(family: str, raw: Target | None) -> list[str]:
    return [ENGINE, *([ENGINE_POOL] if family in DATABASES else []), *([RAW] if raw is not None else [])]


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from the rounds of one (subject, N): median throughput and CPU, every error."""
    errors = [r["first_error"] for r in rounds if r["first_error"]]
    return {
        "subject": rounds[0]["subject"],
        "n": rounds[0]["n"],
        "ops": median([r["ops"] for r in rounds]),
        "cpu_us": median([r["cpu_us"] for r in rounds]),
        "errors": sum(r["errors"] for r in rounds),
        "first_error": errors[0] if errors else None,
        "rounds": rounds,
    }


def run(
    targets: list[Target], env: Env, profile: Profile, pool: WorkerPool, log: Callable[[str], None]
) -> list[Outcome]:
    outcomes = []
    for target in [t for t in targets if t.role == SIMBA]:
        raw = next((t for t in targets if t.family == target.family and t.role == FLOOR), None)
        measured: dict[tuple[str, int], list[dict[str, Any]]] = {}
        failures: list[str] = []
        (worker,) = pool.get(1)
        for turn in range(profile.contention_rounds):
            for count in profile.parallel_counts:
                for subject in rotated(subjects(target.family, raw), turn + count):
                    assert isinstance(subject, str)
                    if not worker.process.is_alive():
                        worker = pool.replace(worker)
                    try:
                        row = worker.run(
                            "benchmarks.scenarios.parallel:names_in_parallel",
                            timeout=profile.parallel_seconds + 240,
                            family=target.family,
                            subject=subject,
                            env=env,
                            count=count,
                            seconds=profile.parallel_seconds,
                            ttl=profile.parallel_ttl,
                            raw=raw.lock if raw is not None else None,
                        )
                    except JobFailed as error:
                        failures.append(f"{subject} N={count}: {error}")
                        log(f"  parallel {target.family} {subject} N={count}: FAILED {short_error(error)}")
                        continue
                    measured.setdefault((subject, count), []).append(row)
                    log(
                        f"  parallel {target.family} {subject} N={count}: {row['ops']:,.0f} cycles/s,"
                        f" {row['cpu_us']:,.0f} µs CPU/cycle, {row['errors']} errors"
                    )
        rows = [
            combine(measured[(subject, count)])
            for count in profile.parallel_counts
            for subject in subjects(target.family, raw)
            if (subject, count) in measured
        ]
        outcomes.append(
            Outcome(
                target.key,
                {"rows": rows, "failures": failures, "seconds": profile.parallel_seconds},
                error=None if rows else (failures[-1] if failures else "no row measured"),
            )
        )
    return outcomes
