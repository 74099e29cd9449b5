"""A fleet on one PostgreSQL: 200 sessions directly and through PgBouncer, and one process's pool.

``python -m benchmarks.fleet`` (``--sessions``, ``--processes``, ``--seconds``
to change the size) starts a PostgreSQL server of its own (hundreds of
connections are more than a shared server allows) and, for the rows that need
one, a PgBouncer in transaction mode in front of it; both are stopped by PID.

Every session is a ``DatabaseBackend`` of its own, as every process of a fleet
has one, in threads of a few worker processes. Each renews every second (3 s
lease) and cycles a lock of its own (acquire + release) twice a second, at
random phases. Measured:

* keep-alives/s on the server: updates of ``simba_session`` rows counted by
  PostgreSQL (``pg_stat_user_tables``, read once every connection closed);
* acquire + release p50 / p99, and a renewal's, on the clients;
* server connections (``pg_stat_activity``): at rest, once every session is
  open and listening, and the peak under load, sampled every 0.1 s;
* one process's own connections with the default pool and others: at rest, and
  the peak with 8 threads cycling locks.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .fleet_workers import CYCLE_EVERY, LEASE, RENEW, pool_footprint, run_sessions
from .own_postgres import OwnPostgres, own_postgres
from .stats import percentile

DATABASE = "simba_fleet"
PGBOUNCER_POOL = 10


@dataclass(frozen=True)
class Mode:
    label: str
    through_pgbouncer: bool
    listen: bool  # LISTEN over a direct connection (PostgreSQL's notifications)


MODES = [
    Mode("direct", through_pgbouncer=False, listen=True),
    Mode("PgBouncer, LISTEN direct", through_pgbouncer=True, listen=True),
    Mode("PgBouncer, polling", through_pgbouncer=True, listen=False),
]


def database_settings(host: str, port: int, user: str) -> dict[str, Any]:
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE,
        "USER": user,
        "PASSWORD": "",
        "HOST": host,
        "PORT": str(port),
    }


def prepare(server: OwnPostgres) -> None:
    """Create the database and migrate django_simba into it, in a process of its own."""
    import psycopg

    with psycopg.connect(host=server.host, port=server.port, user=server.user, dbname="postgres") as conn:
        conn.autocommit = True
        conn.execute(f'CREATE DATABASE "{DATABASE}"')
    context = multiprocessing.get_context("spawn")
    process = context.Process(
        target=_migrate, args=(database_settings(server.host, server.port, server.user),)
    )
    process.start()
    process.join(120)
    if process.exitcode != 0:
        raise RuntimeError("migrate django_simba failed")


def _migrate(database: dict[str, Any]) -> None:
    from django.core.management import call_command

    from .fleet_workers import setup_django

    setup_django(database)
    call_command("migrate", "django_simba", verbosity=0)


class ServerProbe:
    """A direct connection that counts what PostgreSQL sees."""

    def __init__(self, server: OwnPostgres) -> None:
        import psycopg

        self._conn = psycopg.connect(
            host=server.host, port=server.port, user=server.user, dbname=DATABASE, autocommit=True
        )

    def connections(self) -> int:
        row = self._conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'"
            " AND pid <> pg_backend_pid()",
            (DATABASE,),
        ).fetchone()
        return int(row[0]) if row else 0

    def commit_latency(self, count: int = 200) -> tuple[float, float]:
        """p50 and p99 (ms) of one bare committed UPDATE: this server's floor for any write."""
        self._conn.execute("CREATE TABLE IF NOT EXISTS fleet_floor (id int PRIMARY KEY, n bigint)")
        self._conn.execute("INSERT INTO fleet_floor VALUES (1, 0) ON CONFLICT DO NOTHING")
        times = []
        for _ in range(count):
            started = time.monotonic()
            self._conn.execute("UPDATE fleet_floor SET n = n + 1 WHERE id = 1")
            times.append(time.monotonic() - started)
        return percentile(times, 0.5) * 1000, percentile(times, 0.99) * 1000

    def renewals(self) -> int:
        row = self._conn.execute(
            "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'simba_session'"
        ).fetchone()
        return int(row[0]) if row else 0

    def flushed_renewals(self, others_gone: float = 10.0) -> int:
        """Renewals once every other connection closed (a backend's counts reach the stats as it exits)."""
        deadline = time.monotonic() + others_gone
        while self.connections() and time.monotonic() < deadline:
            time.sleep(0.05)
        self._conn.execute("SELECT pg_stat_clear_snapshot()")
        return self.renewals()

    def close(self) -> None:
        self._conn.close()


@contextlib.contextmanager
def endpoint(server: OwnPostgres, mode: Mode) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The worker's database settings and backend options for ``mode`` (a PgBouncer for its rows)."""
    direct = database_settings(server.host, server.port, server.user)
    if not mode.through_pgbouncer:
        yield direct, {}
        return
    from tests.servers.pgbouncer import pgbouncer

    with pgbouncer(server.host, server.port, [server.user], pool_size=PGBOUNCER_POOL) as bouncer:
        bounced = {**direct, "HOST": bouncer.host, "PORT": str(bouncer.port)}
        options: dict[str, Any] = {"transaction_pooling": True}
        if mode.listen:
            options["listen"] = {"HOST": server.host, "PORT": str(server.port)}
        yield bounced, options


def run_fleet(
    server: OwnPostgres, mode: Mode, sessions: int, processes: int, seconds: float
) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    probe = ServerProbe(server)
    try:
        with endpoint(server, mode) as (database, options):
            before = probe.flushed_renewals()
            ready, go = context.Barrier(processes + 1), context.Barrier(processes + 1)
            start_at = context.Array("d", 2)
            results = context.Queue()
            share = -(-sessions // processes)
            workers = []
            for n in range(processes):
                first, count = n * share, min(share, sessions - n * share)
                args = (database, options, first, count, CYCLE_EVERY, ready, go, start_at, results)
                workers.append(context.Process(target=run_sessions, args=args))
            for worker in workers:
                worker.start()
            ready.wait(180)
            time.sleep(1.0)  # listeners connecting, PgBouncer's pool settling: "at rest"
            at_rest = probe.connections()
            start_at[0] = time.monotonic() + 0.5
            start_at[1] = start_at[0] + seconds
            go.wait(30)
            peak = _sample_peak(probe, start_at[0], start_at[1])
            collected = [results.get(timeout=seconds + 120) for _ in workers]
            for worker in workers:
                worker.join(60)
        renewals = probe.flushed_renewals() - before
    finally:
        probe.close()
    cycles = [value for one in collected for value in one["cycles"]]
    renewal_times = [value for one in collected for value in one["renewals"]]
    return {
        "mode": mode.label,
        "sessions": sessions,
        "seconds": seconds,
        "renewals_per_s": renewals / seconds,
        "expected_per_s": sessions / RENEW,
        "cycles_per_s": len(cycles) / seconds,
        "cycle_p50_ms": percentile(cycles, 0.5) * 1000,
        "cycle_p99_ms": percentile(cycles, 0.99) * 1000,
        "renewal_p50_ms": percentile(renewal_times, 0.5) * 1000,
        "renewal_p99_ms": percentile(renewal_times, 0.99) * 1000,
        "at_rest": at_rest,
        "peak": peak,
        "errors": sum(one["errors"] for one in collected),
        "lost_sessions": sum(one["lost_sessions"] for one in collected),
    }


def _sample_peak(probe: ServerProbe, start: float, end: float) -> int:
    peak = 0
    while time.monotonic() < start:
        time.sleep(0.01)
    while time.monotonic() < end:
        peak = max(peak, probe.connections())
        time.sleep(0.1)
    return peak


def run_footprint(server: OwnPostgres, options: dict[str, Any], seconds: float) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    database = database_settings(server.host, server.port, server.user)
    probe = ServerProbe(server)
    try:
        worker = context.Process(target=pool_footprint, args=(database, options, seconds, results))
        worker.start()
        peak_server = 0
        found: dict[str, Any] | None = None
        while found is None:
            peak_server = max(peak_server, probe.connections())
            with contextlib.suppress(Exception):
                found = results.get(timeout=0.05)
        worker.join(30)
    finally:
        probe.close()
    return {**found, "peak_server": peak_server}


def print_tables(
    fleet: list[dict[str, Any]], footprints: list[tuple[str, dict[str, Any]]], floor: tuple[float, float]
) -> None:
    print()
    print(
        f"{len(fleet) and fleet[0]['sessions']} sessions on one PostgreSQL 15, each renewing every "
        f"{RENEW:g} s ({LEASE:g} s lease) and cycling a lock of its own every {CYCLE_EVERY:g} s, "
        f"{fleet[0]['seconds']:g} s; PgBouncer: transaction mode, pool of {PGBOUNCER_POOL}"
    )
    rule = "=" * 26 + " " + " ".join(["=" * 11] * 2 + ["=" * 15] * 2 + ["=" * 11] * 2)
    print(rule)
    print(
        f"{'path':<26} {'keep-alive/s':>11} {'cycles/s':>11} {'acq+rel ms':>15} {'renewal ms':>15}"
        f" {'server conn':>11} {'lost / err':>11}"
    )
    second = ["on server", "", "p50 / p99", "p50 / p99", "rest / peak", ""]
    widths = [11, 11, 15, 15, 11, 11]
    print(f"{'':<26} " + " ".join(f"{text:>{width}}" for text, width in zip(second, widths, strict=True)))
    print(rule)
    for row in fleet:
        print(
            f"{row['mode']:<26} {row['renewals_per_s']:>11.0f} {row['cycles_per_s']:>11.0f}"
            f" {row['cycle_p50_ms']:>6.2f} / {row['cycle_p99_ms']:<6.2f}"
            f" {row['renewal_p50_ms']:>6.2f} / {row['renewal_p99_ms']:<6.2f}"
            f" {row['at_rest']:>4} / {row['peak']:<4} {row['lost_sessions']:>4} / {row['errors']:<4}"
        )
    print(rule)
    print(f"expected keep-alives/s: {fleet[0]['expected_per_s']:.0f} (sessions / renew interval)")
    print(f"one bare committed UPDATE on this server, alone: p50 {floor[0]:.2f} ms, p99 {floor[1]:.2f} ms")
    print()
    print("One process's connections (the listener apart), 8 threads cycling locks:")
    rule = "=" * 34 + " " + " ".join(["=" * 8] * 2 + ["=" * 12])
    print(rule)
    print(f"{'pool':<34} {'at rest':>8} {'peak':>8} {'server peak':>12}")
    print(rule)
    for label, row in footprints:
        print(f"{label:<34} {row['at_rest']:>8} {row['peak']:>8} {row['peak_server']:>12}")
    print(rule)
    print("server peak: that process's connections on the server, its LISTEN connection included")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    # Direct: every session's idle connection and its listener, and a second one under load.
    with own_postgres(max_connections=3 * args.sessions + 50) as server:
        print(f"PostgreSQL of the run on port {server.port} (pid {server.pid})", flush=True)
        prepare(server)
        probe = ServerProbe(server)
        floor = probe.commit_latency()
        probe.close()
        fleet = []
        for mode in MODES:
            print(f"fleet: {mode.label} ...", flush=True)
            fleet.append(run_fleet(server, mode, args.sessions, args.processes, args.seconds))
        footprints = []
        for label, options in [
            ("default (max_connections 2, idle 1)", {}),
            ("max_connections 1", {"max_connections": 1}),
            ("max_connections 4", {"max_connections": 4}),
        ]:
            print(f"footprint: {label} ...", flush=True)
            footprints.append((label, run_footprint(server, options, 3.0)))
    print_tables(fleet, footprints, floor)


if __name__ == "__main__":
    main()
