"""The restart trial of issue 22: three processes, one lock, a fenced register, three server restarts.

Each backend's server is one of the test's own, restarted three times while a worker holds the
lock, each time once the lock changed hands again: Redis without persistence (every restart loses
every key, so the scripts hold new terms back and take tokens from the clock), a standalone
ZooKeeper killed and started on its data directory, PostgreSQL shut down immediately and started
with WAL recovery, as after a crash. The verdict holds every run to: no write refused while its
term said valid, no token granted twice, tokens increasing, one believer at a time.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.faults import scenario
from tests.faults.scenario import FaultRun

pytestmark = pytest.mark.timeout(120)

HOLD_BACK = "no new term of any name is granted there"


@pytest.mark.redis
def test_redis_without_persistence_restarted_three_times(fault_run: FaultRun, forgetful_redis: Any) -> None:
    fault_run.start("redis/no persistence", "redis", {"url": forgetful_redis.url})

    def crash() -> None:
        forgetful_redis.kill()  # SIGKILL: nothing is saved, and there is nothing to save
        forgetful_redis.start()

    trial = scenario.restart_trial(fault_run, crash, "3 restarts, no persistence")
    assert trial.verdict.terms > 6
    fleet = fault_run.fleet
    assert fleet is not None
    for worker in fleet:
        warned = [e for e in worker.events() if e["e"] == "log" and HOLD_BACK in e["message"]]
        assert len(warned) <= scenario.RESTARTS, warned  # once per hold-back, not per refused attempt
    assert any(HOLD_BACK in e.get("message", "") for e in fleet.events())


@pytest.mark.zookeeper
def test_zookeeper_restarted_three_times(fault_run: FaultRun, zookeeper_server: Any) -> None:
    options = {"hosts": zookeeper_server.hosts, "root": f"/simba-faults/{fault_run.name}"}
    fault_run.start("zookeeper", "zookeeper", options)
    trial = scenario.restart_trial(fault_run, lambda: zookeeper_server.restart(crash=True), "3 restarts")
    assert trial.verdict.terms > 6


@pytest.mark.postgresql
def test_postgresql_restarted_three_times(
    fault_run: FaultRun, own_postgresql: tuple[Any, dict[str, Any]]
) -> None:
    server, databases = own_postgresql
    fault_run.start("database/postgresql (own)", "database", {}, databases)
    trial = scenario.restart_trial(fault_run, server.crash_restart, "3 restarts (immediate)")
    assert trial.verdict.terms > 6
