"""Real faults on the database backend: PostgreSQL (directly and through PgBouncer), MariaDB, SQLite.

Three workers contend for one lock and write a fenced register; the holder is
killed, paused past its lease, or cut off from the database. Through PgBouncer
(transaction pooling) the workers listen over a direct connection. SQLite has no
server to cut connections on: its counterpart is another process holding the
database's exclusive lock for longer than a lease, so no call gets through.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from django_simba.testing import wait_until
from tests.faults import injectors, scenario
from tests.faults.fleet import WorkerProcess
from tests.faults.scenario import TIMING, FaultRun, RegisterDB
from tests.faults.servers import MYSQL

pytestmark = pytest.mark.timeout(90)

DATABASES = [
    pytest.param("postgresql", marks=pytest.mark.postgresql, id="postgresql"),
    pytest.param("mysql", marks=pytest.mark.mysql, id="mariadb"),
    pytest.param("sqlite", id="sqlite"),
]
LABELS = {"postgresql": "database/postgresql", "mysql": "database/mariadb", "sqlite": "database/sqlite"}


def start(run: FaultRun, databases: Callable[[str], dict[str, Any]], alias: str) -> None:
    run.start(LABELS[alias], "database", {}, databases(alias))


PGBOUNCER_LABEL = "database/pgbouncer"  # PostgreSQL through it


def start_through_pgbouncer(run: FaultRun, bounced: tuple[dict[str, Any], dict[str, Any]]) -> None:
    options, databases = bounced
    run.start(PGBOUNCER_LABEL, "database", options, databases)


@pytest.mark.parametrize("alias", DATABASES)
def test_holder_killed(fault_run: FaultRun, databases: Callable[[str], dict[str, Any]], alias: str) -> None:
    start(fault_run, databases, alias)
    scenario.sigkill_holder(fault_run)


@pytest.mark.parametrize("alias", DATABASES)
def test_holder_paused_past_its_lease(
    fault_run: FaultRun, databases: Callable[[str], dict[str, Any]], alias: str
) -> None:
    start(fault_run, databases, alias)
    scenario.sigstop_holder(fault_run)


@pytest.mark.postgresql
def test_holder_connections_terminated_on_postgresql(
    fault_run: FaultRun, databases: Callable[[str], dict[str, Any]], register_db: RegisterDB
) -> None:
    start(fault_run, databases, "postgresql")

    def terminate(victim: WorkerProcess) -> int:
        # the worker names its backend's connections after its pid; the register's are named apart
        return injectors.terminate_postgres_backends(register_db.admin, f"simba-fault-{victim.pid}")

    scenario.connections_killed(fault_run, terminate, "pg_terminate_backend")


@pytest.mark.postgresql
def test_holder_killed_through_pgbouncer(
    fault_run: FaultRun, through_pgbouncer: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    start_through_pgbouncer(fault_run, through_pgbouncer)
    scenario.sigkill_holder(fault_run)


@pytest.mark.postgresql
def test_holder_paused_past_its_lease_through_pgbouncer(
    fault_run: FaultRun, through_pgbouncer: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    start_through_pgbouncer(fault_run, through_pgbouncer)
    scenario.sigstop_holder(fault_run)


@pytest.mark.postgresql
def test_server_connections_terminated_through_pgbouncer(
    fault_run: FaultRun, through_pgbouncer: tuple[dict[str, Any], dict[str, Any]], register_db: RegisterDB
) -> None:
    """PgBouncer's server connections last used by the holder (and its direct listener) are killed."""
    start_through_pgbouncer(fault_run, through_pgbouncer)

    def terminate(victim: WorkerProcess) -> int:
        return injectors.terminate_postgres_backends(register_db.admin, f"simba-fault-{victim.pid}")

    scenario.connections_killed(fault_run, terminate, "pg_terminate_backend")


@pytest.mark.mysql
def test_holder_connections_killed_on_mariadb(
    fault_run: FaultRun, databases: Callable[[str], dict[str, Any]]
) -> None:
    import MySQLdb

    start(fault_run, databases, "mysql")
    admin = MySQLdb.connect(
        host=MYSQL["HOST"], port=int(MYSQL["PORT"]), user=MYSQL["USER"], passwd=MYSQL["PASSWORD"]
    )
    try:

        def kill(victim: WorkerProcess) -> int:
            ports = injectors.local_ports(victim.pid, int(MYSQL["PORT"]))
            return injectors.kill_mysql_connections(admin, ports)

        scenario.connections_killed(fault_run, kill, "KILL <connection>")
    finally:
        admin.close()


def test_sqlite_locked_by_another_process_past_the_lease(
    fault_run: FaultRun, databases: Callable[[str], dict[str, Any]]
) -> None:
    """No call reaches the database for longer than a lease: the holder's term ends by its deadline.

    Nobody can take over while the lock is held; once it is released, a waiting
    worker takes over the expired session's lease at its next attempt.
    """
    # holders keep the lock past a lease, so the stall catches one that must stop on its own
    fault_run.start(LABELS["sqlite"], "database", {}, databases("sqlite"), hold=[2.5, 3.0])
    fleet = fault_run.fleet
    assert fleet is not None
    victim, acquired = fleet.fresh_holder()
    token = acquired["token"]
    path = databases("sqlite")["default"]["NAME"]
    with injectors.sqlite_exclusive(path):
        fault_at = time.monotonic()

        def ended() -> bool:
            return any(
                e.get("token") == token
                and (e["e"] in ("lost", "released") or (e["e"] == "write" and e["late"]))
                for e in victim.events()
            )

        wait_until(ended, TIMING.lease + TIMING.latency + 2, message=f"{victim.id} seeing its term end")
        noticed = time.monotonic() - fault_at
        released_at = time.monotonic()
    believed = scenario.last_believed(fleet.events(), victim.id, token)
    assert believed is not None
    # its last renewal was sent before the lock was taken: the term cannot outlive fault_at + lease
    assert believed - fault_at <= TIMING.lease, f"believed valid {believed - fault_at:.3f} s into the stall"
    new = fault_run.first_term_after(released_at, TIMING.takeover_bound + 5)
    assert new["token"] > token
    fault_run.keep_going(released_at)
    fault_run.finish(
        "exclusive lock > lease",
        takeover=new["at"] - released_at,
        bound=TIMING.retry + TIMING.latency,
        detection=noticed,
        note=f"holder saw its term end {noticed:.2f} s into the stall; take-over timed from the unlock",
    )
