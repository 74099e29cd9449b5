"""What names nobody uses any more cost a process: state kept, a keep-alive's reconcile, memory.

    python -m benchmarks.idle_names [--names 100000]

Locks and releases N distinct names (as a project that locks ``invoice:{id}`` does), lets one
keep-alive and then one lease go by, and prints what the engine still keeps: its names (slots,
and the grant gate's floors of names forgotten within the last lease), the time of one
keep-alive's reconcile, and the memory allocated by the engine's modules that is still live
(tracemalloc, in a second run, so that tracing does not slow the timed one). The engine runs on
the in-memory backend and a virtual clock, so the figures are the engine's alone; what a backend
keeps for a name is in docs/security.rst.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Callable

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import Engine, EngineConfig
from django_simba.spi import Renewal
from django_simba.testing.runtime import VirtualRuntime

LEASE, RENEW = 15.0, 5.0
STAGES = ("after the releases", "after one keep-alive", "after one lease more")


def _reconcile_ms(engine: Engine) -> float:
    session = engine.session_id
    assert session is not None
    renewal = Renewal(LEASE, {})
    rounds = 20
    started = time.perf_counter()
    for _ in range(rounds):
        with engine.mutex:
            engine.lines.reconcile(session, engine.runtime.now(), renewal, None)
    return (time.perf_counter() - started) / rounds * 1000


def _engine_mib() -> float:
    engine_only = [tracemalloc.Filter(True, "*/django_simba/engine/*")]
    snapshot = tracemalloc.take_snapshot().filter_traces(engine_only)
    return sum(stat.size for stat in snapshot.statistics("filename")) / 2**20


def _run(names: int, measure: Callable[[Engine], float]) -> list[tuple[int, float]]:
    runtime = VirtualRuntime(seed=1, timeout=RENEW)
    backend = MemoryBackend(timeout=RENEW, clock=runtime.now)
    engine = Engine(backend, EngineConfig(lease_duration=LEASE, renew_interval=RENEW), runtime)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    for number in range(names):
        with engine.lock(f"invoice:{number}"):
            pass
    rows = []
    for advance in (0.0, RENEW + 0.1, LEASE + RENEW):
        runtime.advance(advance)
        gc.collect()
        kept = len(engine.lines.slots) + len(getattr(engine.lines, "_retired", {}))
        rows.append((kept, measure(engine)))
    engine.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--names", type=int, default=100_000)
    names = parser.parse_args().names
    timed = _run(names, _reconcile_ms)
    tracemalloc.start()
    traced = _run(names, lambda engine: _engine_mib())
    tracemalloc.stop()
    print(f"{names:,} names locked and released once each (LEASE_DURATION {LEASE:g} s, RENEW {RENEW:g} s)")
    print(f"{'when':<22} {'names kept':>11} {'reconcile ms':>13} {'engine MiB':>11}")
    for when, (kept, ms), (_, mib) in zip(STAGES, timed, traced, strict=True):
        print(f"{when:<22} {kept:>11,} {ms:>13.2f} {mib:>11.1f}")


if __name__ == "__main__":
    main()
