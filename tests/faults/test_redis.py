"""Real faults on the Redis backend, on a redis-server of the tests' own.

The server writes an append-only file fsynced at every write (what the
backend's documentation asks of an operator who restarts Redis), so a restart
loses no token; without it a restart starts every token again at 1, which is
the token-reset premise the simulation covers, not a fault a client can mask.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.faults import injectors, scenario
from tests.faults.fleet import WorkerProcess
from tests.faults.scenario import TIMING, FaultRun

pytestmark = [pytest.mark.redis, pytest.mark.timeout(90)]


def start(run: FaultRun, server: Any) -> None:
    run.start("redis", "redis", {"url": server.url})


def test_holder_killed(fault_run: FaultRun, own_redis: Any) -> None:
    start(fault_run, own_redis)
    scenario.sigkill_holder(fault_run)


def test_holder_paused_past_its_lease(fault_run: FaultRun, own_redis: Any) -> None:
    start(fault_run, own_redis)
    scenario.sigstop_holder(fault_run)


def test_holder_clients_killed(fault_run: FaultRun, own_redis: Any) -> None:
    start(fault_run, own_redis)
    admin = own_redis.client(decode_responses=True)
    try:

        def kill(victim: WorkerProcess) -> int:
            return injectors.kill_redis_clients(admin, injectors.local_ports(victim.pid, own_redis.port))

        scenario.connections_killed(fault_run, kill, "CLIENT KILL")
    finally:
        admin.close()


def test_server_restarted(fault_run: FaultRun, own_redis: Any) -> None:
    """Every worker loses its connections while Redis restarts; sessions and tokens survive (AOF)."""
    start(fault_run, own_redis)
    fleet = fault_run.fleet
    assert fleet is not None
    victim, acquired = fleet.fresh_holder()
    highest = max(e["token"] for e in fleet.events() if e["e"] == "acquired")
    fault_at = time.monotonic()
    own_redis.restart()  # SIGTERM (the AOF is complete), then start on the same port and wait for PING
    back_at = time.monotonic()
    downtime = back_at - fault_at
    new = fault_run.first_term_after(back_at, TIMING.takeover_bound + 10)
    assert new["token"] > highest, f"token {new['token']} after the restart, {highest} before: tokens reset"
    fault_run.keep_going(back_at)
    lost = any(e["e"] == "lost" and e["token"] == acquired["token"] for e in victim.events())
    fault_run.finish(
        "server restart (AOF)",
        takeover=new["at"] - fault_at,
        bound=downtime + TIMING.takeover_bound,
        detection=downtime,
        note=f"down {downtime:.2f} s; holder {'lost' if lost else 'kept'} its term; take-over = next term",
    )
