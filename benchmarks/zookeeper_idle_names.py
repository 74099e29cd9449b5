"""What names nobody holds any more cost on ZooKeeper (issue 28.4), on a server of its own.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/zookeeper_idle_names.py [--names 5000] [--cycles 2000]

The server is the test suite's standalone one (``tests/servers/zookeeper.py``) with the
production container sweep (``znode.container.checkIntervalMs`` 60 s, ``maxPerMinute`` 10,000),
so what is left is what the backend leaves.

1. One session locks and releases ``--names`` distinct names (``invoice:{n}``), then joins and
   leaves as many groups. Znodes (``zk_znode_count``), the server's data size
   (``zk_approximate_data_size``: paths and data) and the lines under ``{root}/leases``: right
   after, after the next keep-alive, after the one after it, after the last one with deletes to
   send. And what the backend keeps in
   memory for them (the session's known lines, its idle lines, the ACL and foreign-node caches).
2. The uncontended cycle (acquire + release) on one hot name and on a new name every cycle,
   p50 / p99 in ms, and the keep-alive with ``--names`` idle lines to delete behind it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from kazoo.client import KazooClient  # noqa: E402

from django_simba.backends.zookeeper import ZookeeperBackend  # noqa: E402
from django_simba.backends.zookeeper.idle import PER_KEEP_ALIVE  # noqa: E402
from tests.servers.zookeeper import monitor, zookeeper_standalone  # noqa: E402

PRODUCTION_SWEEP = ["-Dznode.container.checkIntervalMs=60000", "-Dznode.container.maxPerMinute=10000"]


def server_figures(port: int, raw: KazooClient, root: str) -> dict[str, int]:
    found = monitor(port)
    leases = raw.exists(f"{root}/leases")
    groups = raw.exists(f"{root}/groups")
    return {
        "znodes": int(found["zk_znode_count"]),
        "data bytes": int(found["zk_approximate_data_size"]),
        "lines": leases.numChildren if leases else 0,
        "groups": groups.numChildren if groups else 0,
    }


def client_figures(backend: ZookeeperBackend, session_id: str) -> dict[str, int]:
    session = backend._session(session_id)
    return {
        "known lines": len(session.places._lines_seen),
        "idle lines": len(session.leases.idle),
        "idle groups": len(session.groups.idle),
        "ACL-checked lines": len(backend._guard._sound),
        "foreign-node cache": len(backend._foreign._sessions) + len(backend._foreign._foreign),
    }


def delta(now: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {key: value - before.get(key, 0) for key, value in now.items()}


def settled(
    backend: ZookeeperBackend, session_id: str, port: int, raw: KazooClient, root: str
) -> dict[str, int]:
    """The figures once the deletes a keep-alive sent were applied (a sync on the same connection)."""
    backend._session(session_id).client.sync(f"{root}/leases")  # the groups' deletes went before
    return server_figures(port, raw, root)


def idle_names(hosts: str, port: int, names: int) -> None:
    root = f"/simba-idle-{uuid.uuid4().hex[:8]}"
    raw = KazooClient(hosts=hosts)
    raw.start(10)
    backend = ZookeeperBackend({"hosts": hosts, "root": root}, timeout=10)
    session_id = backend.open_session(60.0, "idle names").session_id
    before = server_figures(port, raw, root)
    for n in range(names):
        grant = backend.acquire(session_id, f"invoice:{n}")
        assert grant is not None
        backend.release(session_id, f"invoice:{n}", grant.token)
    for n in range(names):
        backend.join(session_id, f"group:{n}")
        backend.leave(session_id, f"group:{n}")
    rows = [("after the releases and leaves", settled(backend, session_id, port, raw, root))]
    clients = [client_figures(backend, session_id)]
    session = backend._session(session_id)
    beat = 0
    while beat < 2 or len(session.leases.idle) or len(session.groups.idle):
        beat += 1
        backend.keep_alive(session_id, 60.0)
        if beat <= 2 or not (len(session.leases.idle) or len(session.groups.idle)):
            rows.append((f"after keep-alive {beat}", settled(backend, session_id, port, raw, root)))
            clients.append(client_figures(backend, session_id))
    print(f"\n{names:,} names locked and released, {names:,} groups joined and left (one session)")
    print(f"{'':32}{'znodes':>10}{'data bytes':>12}{'lines':>8}{'groups':>8}   client state")
    for (label, figures), client in zip(rows, clients):
        d = delta(figures, before)
        state = ", ".join(f"{k} {v:,}" for k, v in client.items())
        counts = f"{d['znodes']:>10,}{d['data bytes']:>12,}{d['lines']:>8,}{d['groups']:>8,}"
        print(f"{label:32}{counts}   {state}")
    most = delta(rows[0][1], before)
    print(
        f"an idle name costs one line node ({most['data bytes'] / (most['lines'] + names):.0f} data bytes "
        f"on average here) until its line goes; {most['lines']:,} lines at most were left at once"
    )
    backend.close()
    raw.stop()
    raw.close()


def cycles(hosts: str, count: int) -> None:
    root = f"/simba-cycle-{uuid.uuid4().hex[:8]}"
    backend = ZookeeperBackend({"hosts": hosts, "root": root}, timeout=10)
    session_id = backend.open_session(60.0, "cycles").session_id

    def timed(name_of: object) -> list[float]:
        samples = []
        for n in range(count):
            name = name_of(n)  # type: ignore[operator]
            started = time.perf_counter()
            grant = backend.acquire(session_id, name)
            assert grant is not None
            backend.release(session_id, name, grant.token)
            samples.append((time.perf_counter() - started) * 1000)
            if n % 500 == 499:
                backend.keep_alive(session_id, 60.0)  # lines idle an interval go meanwhile
        return samples

    def show(label: str, samples: list[float]) -> None:
        ordered = sorted(samples)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        print(f"{label:40} p50 {statistics.median(samples):6.2f} ms   p99 {p99:6.2f} ms")

    print(f"\nuncontended acquire + release, {count:,} cycles after 200 warm-up ones")
    timed(lambda n: "warm")
    show("one hot name", timed(lambda n: "hot"[: 3 + 0 * n]))
    show("a new name every cycle", timed(lambda n: f"new:{n}"))
    for n in range(count):
        grant = backend.acquire(session_id, f"idle:{n}")
        assert grant is not None
        backend.release(session_id, f"idle:{n}", grant.token)
    backend.keep_alive(session_id, 60.0)
    started = time.perf_counter()
    backend.keep_alive(session_id, 60.0)  # sends PER_KEEP_ALIVE line deletes once answered
    with_deletes = (time.perf_counter() - started) * 1000
    while len(backend._session(session_id).leases.idle):
        backend.keep_alive(session_id, 60.0)
    backend._session(session_id).client.sync(f"{root}/leases")  # the groups' deletes went before
    started = time.perf_counter()
    backend.keep_alive(session_id, 60.0)
    without = (time.perf_counter() - started) * 1000
    print(f"keep-alive sending {PER_KEEP_ALIVE} line deletes {with_deletes:.2f} ms, none {without:.2f} ms")
    backend.close()


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--names", type=int, default=5000)
    parser.add_argument("--cycles", type=int, default=2000)
    args = parser.parse_args()
    with zookeeper_standalone(jvm_options=PRODUCTION_SWEEP) as server:
        idle_names(server.hosts, server.client_port, args.names)
        cycles(server.hosts, args.cycles)


if __name__ == "__main__":
    main()
