"""What the Redis backend costs, side by side with the raw floor, on servers of its own.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/redis_costs.py [--rounds 5] [--cycles 2000]

1. Uncontended acquire + release, one process, one name: the backend (single node, and a
   3-master cluster) against a bare ``SET NX PX`` + ``DEL`` on the same server with the same
   client settings. Each round runs 200 warm-up cycles then ``--cycles`` timed ones; the
   order of the targets rotates every round; the table gives the median over rounds of each
   round's p50 / p99 / ops/s, and the round trips (redis-py socket sends) per cycle.
2. One keep-alive with 1 and 1,000 leases held: round trips (socket sends; on the cluster the
   per-node pipelines are written to every node before any reply is read), scripts and
   commands the servers processed (``total_commands_processed``, which counts the commands run
   inside Lua), and the median wall time of 20 keep-alives.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django_simba.backends.redis import RedisBackend
from django_simba.backends.redis.connection import client_settings
from tests.backends.redis.counting import counting_sends, server_counters
from tests.servers.redis_cluster import redis_cluster, redis_server

Cycle = Callable[[int], None]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def raw_cycle(url: str) -> Cycle:
    client = redis.Redis.from_url(url, **client_settings(5.0))

    def cycle(i: int) -> None:
        assert client.set("bench:raw", str(i), nx=True, px=10_000)
        client.delete("bench:raw")

    return cycle


def simba_cycle(backend: RedisBackend, name: str) -> Cycle:
    sid = backend.open_session(60, "bench").session_id

    def cycle(i: int) -> None:
        assert backend.acquire(sid, name) is not None
        backend.release(sid, name)

    return cycle


def time_round(cycle: Cycle, cycles: int) -> tuple[float, float, float]:
    for i in range(200):
        cycle(i)
    samples = []
    started = time.perf_counter()
    for i in range(cycles):
        t0 = time.perf_counter()
        cycle(i)
        samples.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - started
    return percentile(samples, 0.5) * 1e6, percentile(samples, 0.99) * 1e6, cycles / elapsed


def sends_per_cycle(cycle: Cycle) -> int:
    with pytest.MonkeyPatch.context() as patch, counting_sends(patch) as sends:
        cycle(0)
    return sends.count


def latency(targets: dict[str, Cycle], rounds: int, cycles: int) -> None:
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in targets}
    names = list(targets)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            results[name].append(time_round(targets[name], cycles))
    print(f"\n## acquire + release, {rounds} rounds x {cycles} cycles (median over rounds)\n")
    print("| target | p50 µs | p99 µs | ops/s | round trips per cycle |")
    print("|---|---|---|---|---|")
    for name in names:
        p50 = statistics.median(r[0] for r in results[name])
        p99 = statistics.median(r[1] for r in results[name])
        ops = statistics.median(r[2] for r in results[name])
        print(f"| {name} | {p50:.0f} | {p99:.0f} | {ops:.0f} | {sends_per_cycle(targets[name])} |")


def keep_alive_costs(label: str, backend: RedisBackend, admins: list[redis.Redis], held: int) -> None:
    sid = backend.open_session(60, "bench").session_id
    for i in range(held):
        assert backend.acquire(sid, f"bench-{label.split()[0]}-{held}.{i}") is not None
    backend.keep_alive(sid, 60)
    before = server_counters(admins)
    with pytest.MonkeyPatch.context() as patch, counting_sends(patch) as sends:
        renewal = backend.keep_alive(sid, 60)
    after = server_counters(admins)
    assert len(renewal.owned) == held
    commands = after[0] - before[0] - 2 * len(admins)  # the INFO calls themselves
    timings = []
    for _ in range(20):
        t0 = time.perf_counter()
        backend.keep_alive(sid, 60)
        timings.append(time.perf_counter() - t0)
    print(
        f"| {label} | {held} | {sends.count} | {after[1] - before[1]} | {commands} "
        f"| {statistics.median(timings) * 1e3:.2f} |"
    )
    backend.close_session(sid)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=2000)
    args = parser.parse_args()
    with redis_server() as server, redis_cluster() as cluster:
        single = RedisBackend({"url": server.url}, timeout=5)
        clustered = RedisBackend({"startup_nodes": cluster.startup_nodes, "cluster": True}, timeout=5)
        version = server.client().info("server")["redis_version"]
        print(f"redis-server {version}, redis-py {redis.__version__}")
        latency(
            {
                "raw SET NX PX + DEL": raw_cycle(server.url),
                "simba single node": simba_cycle(single, "bench:simba"),
                "simba cluster": simba_cycle(clustered, "bench:simba"),
            },
            args.rounds,
            args.cycles,
        )
        print("\n## one keep-alive\n")
        print("| topology | leases held | round trips (sends) | scripts | server commands | median ms |")
        print("|---|---|---|---|---|---|")
        single_admins = [server.client()]
        cluster_admins = [node.client() for node in cluster.nodes]
        for held in (1, 1000):
            keep_alive_costs("single node", single, single_admins, held)
        for held in (1, 1000):
            keep_alive_costs("cluster (3 masters)", clustered, cluster_admins, held)
        single.close()
        clustered.close()


if __name__ == "__main__":
    main()
