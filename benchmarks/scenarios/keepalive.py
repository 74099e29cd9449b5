"""Keep-alive cost with 1, 100, 1,000 and 10,000 leases held by one session.

One holder (a backend session, or a peer's coordinator) acquires leases in
steps; at each step the keep-alive is timed (median of several calls) and its
round trips counted on the client. On ZooKeeper the server's own packet counter
(``mntr``; the server belongs to this run) is shown beside it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..peers.base import Env
from ..stats import median, rotated
from ..targets import Target, build
from ..workers import JobFailed, WorkerPool
from .common import Outcome, Profile, short_error, unique

#: Long enough that a session lives through acquiring 10,000 leases between keep-alives.
HOLDER_TTL = 60.0
CHUNK = 1000


def _server_packets(env: Env) -> int | None:
    port = env.get("zk_port")
    if not port:
        return None
    from tests.servers.zookeeper import monitor

    return int(monitor(port)["zk_packets_received"])


def keep_alive(holder: Any, env: Env, counts: list[int], calls: int, family: str) -> list[dict[str, Any]]:
    """Job: one holder, growing to each count in turn; time and count its keep-alive at each."""
    from ..counting import counting

    subject = build(holder)(env, HOLDER_TTL)
    prefix = unique("keepalive")
    held = 0
    steps = []
    try:
        for count in counts:
            names = [f"{prefix}.{i}" for i in range(held, count)]
            for start in range(0, len(names), CHUNK):
                subject.hold(names[start : start + CHUNK])
                subject.keep_alive()
            held = count
            subject.keep_alive()
            timings = []
            for _ in range(calls):
                before = time.perf_counter_ns()
                subject.keep_alive()
                timings.append((time.perf_counter_ns() - before) / 1e6)
            packets_before = _server_packets(env) if family == "zookeeper" else None
            with counting() as counted:
                subject.keep_alive()
            packets_after = _server_packets(env) if family == "zookeeper" else None
            step: dict[str, Any] = {"leases": count, "ms": median(timings), "rt": counted["rt"]}
            if packets_before is not None and packets_after is not None:
                step["server_packets"] = packets_after - packets_before
            steps.append(step)
        return steps
    finally:
        subject.close()


def run(
    targets: list[Target], env: Env, profile: Profile, pool: WorkerPool, log: Callable[[str], None]
) -> list[Outcome]:
    targets = [target for target in targets if target.holder is not None]
    outcomes = []
    (worker,) = pool.get(1)
    for target in rotated(targets, 0):
        assert isinstance(target, Target)
        counts = list(profile.keepalive_counts)
        if target.role != "simba":
            counts = [count for count in counts if count <= profile.peer_keepalive_max]
        try:
            steps = worker.run(
                "benchmarks.scenarios.keepalive:keep_alive",
                timeout=900,
                holder=target.holder,
                env=env,
                counts=counts,
                calls=profile.keepalive_calls,
                family=target.family,
            )
            outcomes.append(Outcome(target.key, {"steps": steps}))
            log(
                f"  keep-alive {target.key}: "
                + ", ".join(f"{s['leases']}: {s['ms']:.2f} ms/{s['rt']} rt" for s in steps)
            )
        except JobFailed as error:
            outcomes.append(Outcome(target.key, error=str(error)))
            log(f"  keep-alive {target.key}: FAILED {short_error(error)}")
            (worker,) = pool.get(1)
    return outcomes
