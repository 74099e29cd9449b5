"""What the ZooKeeper backend costs, side by side with a raw kazoo floor, on servers of its own.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/zookeeper_costs.py [--rounds 5] [--cycles 1000] [--kills 5]

The servers are the test suite's (``tests/servers/zookeeper.py``): a standalone server and a
3-node ensemble on loopback, tick 100 ms, forceSync on (every write is fsynced).

1. Uncontended acquire + release, one process, one name: the backend against a raw kazoo
   ``create(ephemeral)`` + ``delete`` on the same server. Each round runs 200 warm-up cycles then
   ``--cycles`` timed ones; targets rotate every round; the table gives the median over rounds
   of each round's p50 / p99 / ops/s, and the requests the server received per cycle
   (``zk_packets_received`` of ``mntr``, which also counts the ``mntr`` itself: subtracted).
2. One keep-alive with 1 and 1,000 leases held: requests per keep-alive (same counter, over 20
   keep-alives) and the median wall time.
3. SIGKILL take-over: a holder process (lease 1 s, renewing every 0.2 s) is killed at a random
   point of its cycle; a candidate in this process watches the name and acquires on RELEASED.
   Time from the kill to the candidate's grant, against the negotiated session timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from kazoo.client import KazooClient  # noqa: E402

from django_simba.backends.zookeeper import ZookeeperBackend  # noqa: E402
from django_simba.spi import Notification, NotificationKind  # noqa: E402
from tests.servers.zookeeper import monitor, zookeeper_ensemble, zookeeper_standalone  # noqa: E402

Cycle = Callable[[int], None]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def raw_cycle(hosts: str) -> Cycle:
    client = KazooClient(hosts=hosts, timeout=60)
    client.start(10)
    client.ensure_path("/bench-raw")

    def cycle(i: int) -> None:
        client.create("/bench-raw/lock", b"x", ephemeral=True)
        client.delete("/bench-raw/lock")

    return cycle


def simba_cycle(hosts: str) -> Cycle:
    backend = ZookeeperBackend({"hosts": hosts}, timeout=30)  # a stall shows in p99 instead of aborting
    sid = backend.open_session(60, "bench").session_id
    name = f"bench.{uuid.uuid4().hex[:8]}"
    renewed = [time.monotonic()]

    def cycle(i: int) -> None:
        if time.monotonic() - renewed[0] > 10:  # the watchdog wants a keep-alive within the lease
            backend.keep_alive(sid, 60)
            renewed[0] = time.monotonic()
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


def requests_per_call(port: int, call: Callable[[], object], calls: int) -> float:
    before = int(monitor(port)["zk_packets_received"])
    for _ in range(calls):
        call()
    after = int(monitor(port)["zk_packets_received"])
    return (after - before - 1) / calls


def latency(label: str, hosts: str, port: int, rounds: int, cycles: int) -> None:
    targets = {
        f"raw kazoo create + delete ({label})": raw_cycle(hosts),
        f"simba ({label})": simba_cycle(hosts),
    }
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in targets}
    names = list(targets)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            results[name].append(time_round(targets[name], cycles))
    for name in names:
        p50 = statistics.median(r[0] for r in results[name])
        p99 = statistics.median(r[1] for r in results[name])
        ops = statistics.median(r[2] for r in results[name])
        per_cycle = requests_per_call(port, lambda n=name: targets[n](0), 20)  # type: ignore[misc]
        print(f"| {name} | {p50:.0f} | {p99:.0f} | {ops:.0f} | {per_cycle:g} |")


def keep_alive_costs(hosts: str, port: int) -> None:
    backend = ZookeeperBackend({"hosts": hosts}, timeout=30)
    sid = backend.open_session(60, "bench").session_id
    prefix = f"bench-ka.{uuid.uuid4().hex[:8]}"
    held = 0
    for count in (1, 1000):
        while held < count:
            assert backend.acquire(sid, f"{prefix}.{held}") is not None
            held += 1
        assert len(backend.keep_alive(sid, 60).owned) == count
        requests = requests_per_call(port, lambda: backend.keep_alive(sid, 60), 20)
        timings = []
        for _ in range(20):
            t0 = time.perf_counter()
            backend.keep_alive(sid, 60)
            timings.append(time.perf_counter() - t0)
        print(f"| {count} | {requests:g} | 1 | {statistics.median(timings) * 1e3:.2f} |")
    backend.close()


HOLDER = """
import json, sys, time
from django_simba.backends.zookeeper import ZookeeperBackend

hosts, name, lease = sys.argv[1], sys.argv[2], float(sys.argv[3])
backend = ZookeeperBackend({"hosts": hosts}, timeout=5)
opened = backend.open_session(lease, "holder")
grant = backend.acquire(opened.session_id, name)
print(json.dumps({"token": grant.token, "term": opened.remaining}), flush=True)
while True:
    backend.keep_alive(opened.session_id, lease)
    time.sleep(lease / 5)
"""


def _released_since(seen: list[tuple[float, str]], name: str, since: float) -> bool:
    return any(stamp >= since and released == name for stamp, released in seen)


def kill_takeover(hosts: str, lease: float, trials: int) -> None:
    candidate_side = ZookeeperBackend({"hosts": hosts}, timeout=5)
    released = threading.Condition()
    seen: list[tuple[float, str]] = []

    def listener(event: Notification) -> None:
        if event.kind is NotificationKind.RELEASED:
            with released:
                seen.append((time.monotonic(), event.name))
                released.notify_all()

    candidate_side.subscribe(listener)
    candidate = candidate_side.open_session(60, "candidate").session_id
    figures = []
    term = 0.0
    for _ in range(trials):
        name = f"kill.{uuid.uuid4().hex[:8]}"
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, hosts, name, str(lease)], cwd=REPOSITORY, stdout=subprocess.PIPE
        )
        assert holder.stdout is not None
        term = json.loads(holder.stdout.readline())["term"]
        candidate_side.watch_lease(name)
        assert candidate_side.acquire(candidate, name) is None
        time.sleep(random.uniform(lease, 2 * lease))
        killed_at = time.monotonic()
        os.kill(holder.pid, signal.SIGKILL)
        with released:
            released.wait_for(partial(_released_since, seen, name, killed_at), term + 10)
        grant = candidate_side.acquire(candidate, name)
        assert grant is not None
        figures.append(time.monotonic() - killed_at)
        candidate_side.keep_alive(candidate, 60)
        holder.wait(10)
        holder.stdout.close()
        candidate_side.release(candidate, name)
        candidate_side.unwatch_lease(name)
    candidate_side.close()
    ms = [f * 1000 for f in figures]
    spread = f"{min(ms):.0f} - {max(ms):.0f}"
    print(f"| {lease:g} s | {term:g} s | {trials} | {statistics.median(ms):.0f} | {spread} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=5)
    args = parser.parse_args()
    with zookeeper_standalone() as server, zookeeper_ensemble() as ensemble:
        print(
            f"ZooKeeper {monitor(server.client_port)['zk_version'].split('-')[0]}, tick 100 ms, forceSync on"
        )
        print(f"\n## acquire + release, {args.rounds} rounds x {args.cycles} cycles (median over rounds)\n")
        print("| target | p50 µs | p99 µs | ops/s | requests per cycle |")
        print("|---|---|---|---|---|")
        latency("standalone", server.hosts, server.client_port, args.rounds, args.cycles)
        leader = ensemble.leader()  # count requests on the server the clients use
        latency("ensemble, via the leader", leader.hosts, leader.client_port, args.rounds, args.cycles)
        follower = next(node for node in ensemble.nodes if node is not leader)
        latency("ensemble, via a follower", follower.hosts, follower.client_port, args.rounds, args.cycles)
        print("\n## one keep-alive (standalone)\n")
        print("| leases held | requests per keep-alive | round trips | median ms |")
        print("|---|---|---|---|")
        keep_alive_costs(server.hosts, server.client_port)
        print("\n## SIGKILL of the holder -> candidate holds the lease (standalone)\n")
        print("| lease | negotiated timeout | trials | median ms | min - max ms |")
        print("|---|---|---|---|---|")
        kill_takeover(server.hosts, 1.0, args.kills)
        kill_takeover(server.hosts, 3.0, args.kills)


if __name__ == "__main__":
    main()
