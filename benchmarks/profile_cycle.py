"""Where the client's CPU of an uncontended lock cycle goes, layer by layer.

    python -m benchmarks.profile_cycle [--only postgresql,mysql,sqlite,redis] [--cycles 3000]

Profiles ``lock.acquire(0)`` + ``release()`` on the engine with :mod:`cProfile`, timed by
``time.process_time``, in the calling thread (where an uncontended cycle runs; the engine's
timer and keep-alive threads are not in it), and sums each function's own time by the layer
its code belongs to. The profiler's overhead inflates the Python-heavy layers, so compare the
layers' shares, not their microseconds with ``--scenarios cpu``. Uses the benchmark's
settings (``benchmarks/settings.py``) and servers: a Redis on 127.0.0.1:6379 unless
``--redis-url`` says otherwise.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
import uuid
from collections import defaultdict

from .simba_subjects import start_engine
from .workers import setup_django

#: The layer of a function, by the first of these fragments found in its file's path.
LAYERS = (
    ("django_simba/engine/", "engine"),
    ("django_simba/spi/", "engine"),
    ("django_simba/backends/", "backend"),
    ("django/", "Django's database layer"),
    ("psycopg", "driver"),
    ("MySQLdb", "driver"),
    ("sqlite3", "driver"),
    ("redis/", "driver"),
    ("hiredis", "driver"),
)
FAMILIES = ("postgresql", "mysql", "sqlite", "redis")


def layer(filename: str) -> str:
    for fragment, name in LAYERS:
        if fragment in filename:
            return name
    if filename.startswith("~") or filename.startswith("<"):
        return "built-ins (C calls, locks, sockets)"
    return "other Python"


def profile(
    family: str, cycles: int, env: dict[str, str]
) -> tuple[dict[str, float], list[tuple[float, str]]]:
    """Own CPU µs per cycle by layer, and the costliest functions (µs per cycle, where)."""
    engine = start_engine(family, env, ttl=15.0)
    try:
        lock = engine.lock(f"profile.{uuid.uuid4().hex[:8]}")
        lock.acquire(60)  # a Redis that lost its data holds new terms back for a lease
        lock.release()
        for _ in range(200):  # warm: the name's row, prepared statements, scripts
            lock.acquire(0)
            lock.release()
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        for _ in range(cycles):
            if lock.acquire(0) is None:
                raise RuntimeError("an uncontended acquire was refused")
            lock.release()
        profiler.disable()
    finally:
        engine.close()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    layers: dict[str, float] = defaultdict(float)
    functions = []
    for (filename, line, function), (_, _, own, _, _) in stats.items():
        per_cycle = own / cycles * 1e6
        layers[layer(filename)] += per_cycle
        functions.append(
            (per_cycle, f"{function} ({filename.rsplit('/', 2)[-1] if '/' in filename else filename}:{line})")
        )
    return dict(layers), sorted(functions, reverse=True)[:8]


def main() -> None:
    parse = argparse.ArgumentParser(
        prog="python -m benchmarks.profile_cycle", description=__doc__.split("\n\n")[0]
    )
    parse.add_argument(
        "--only", default=",".join(FAMILIES), help=f"comma-separated among {', '.join(FAMILIES)}"
    )
    parse.add_argument("--cycles", type=int, default=3000)
    parse.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    arguments = parse.parse_args()
    chosen = [family.strip() for family in arguments.only.split(",") if family.strip()]
    unknown = sorted(set(chosen) - set(FAMILIES))
    if unknown:
        raise SystemExit(f"unknown backends: {', '.join(unknown)} (choose among {', '.join(FAMILIES)})")
    setup_django()
    for family in chosen:
        layers, functions = profile(family, arguments.cycles, {"redis_url": arguments.redis_url})
        total = sum(layers.values())
        print(f"\n## {family}: {total:.0f} µs of the calling thread's CPU a cycle, under the profiler")
        print("| layer | µs a cycle | share |\n|---|---|---|")
        for name, cost in sorted(layers.items(), key=lambda item: -item[1]):
            print(f"| {name} | {cost:.1f} | {cost / total:.0%} |")
        print("\ncostliest functions (own time, µs a cycle):")
        for cost, where in functions:
            print(f"  {cost:6.1f}  {where}")


if __name__ == "__main__":
    main()
