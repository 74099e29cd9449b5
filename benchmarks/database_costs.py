"""What the database backend costs per operation, on PostgreSQL, MariaDB and SQLite.

Run from the repository root, with the test suite's servers on loopback::

    PYTHONPATH=. .venv/bin/python benchmarks/database_costs.py [--cycles 2000] [--rounds 3]

``--no-fsync`` turns commit flushes off on PostgreSQL (``synchronous_commit = off``) and
SQLite (``PRAGMA synchronous = OFF``) for every connection of the run, the floor's included,
to show what the statements cost apart from the disk (MariaDB's setting is global: left alone).

It works in databases of its own (``simba_costs`` on PostgreSQL and MariaDB, created and
migrated when missing; a SQLite file in a temporary directory).

1. Uncontended acquire + release, one process, one name: round trips and statements per
   cycle (counted where the backend hands SQL to the driver: one ``execute`` is one round
   trip; on MariaDB also the server's ``Questions`` counter of the connection), and the
   median over rounds of each round's p50 / p99 cycle time after 200 warm-up cycles. The
   raw floor runs in the same rounds, alternating: a one-row upsert that adds one to a fence
   (RETURNING it where the database can) and an UPDATE that frees it, in autocommit on one
   connection of the same driver (2 round trips, 2 commits).
2. One keep-alive of a session holding 1, 100 and 1,000 leases: round trips, statements,
   the server's row count of the reply, and the median wall time of 20 keep-alives.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DATABASE = "simba_costs"
ALIASES = ("postgresql", "mysql", "sqlite")


def configure(directory: Path, database: str = DATABASE) -> None:
    """Django with the three aliases, on the servers' ``database`` and a SQLite file in ``directory``."""
    import django
    from django.conf import settings

    settings.configure(
        USE_TZ=True,
        INSTALLED_APPS=["django_simba"],
        SIMBA={"BACKEND": "memory", "AUTOSTART": False},  # no engine of its own in this process
        DATABASES={
            "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(directory / "default.sqlite3")},
            "sqlite": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(directory / "costs.sqlite3")},
            "postgresql": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": database,
                "USER": "root",
                "HOST": "127.0.0.1",
                "PORT": "5432",
            },
            "mysql": {
                "ENGINE": "django.db.backends.mysql",
                "NAME": database,
                "USER": "root",
                "HOST": "127.0.0.1",
                "PORT": "3306",
                "OPTIONS": {"charset": "utf8mb4"},
            },
        },
    )
    django.setup()


def create_databases(database: str = DATABASE) -> None:
    import MySQLdb
    import psycopg

    with psycopg.connect("host=127.0.0.1 user=root dbname=postgres", autocommit=True) as pg:
        if not pg.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone():
            pg.execute(f"CREATE DATABASE {database}")
    my = MySQLdb.connect(host="127.0.0.1", user="root")
    my.query(f"CREATE DATABASE IF NOT EXISTS {database} CHARACTER SET utf8mb4")
    my.close()


def without_fsync(sender: Any, connection: Any, **kwargs: Any) -> None:
    statement = {"postgresql": "SET synchronous_commit = off", "sqlite": "PRAGMA synchronous = OFF"}
    if connection.vendor in statement:
        cursor = connection.connection.cursor()
        cursor.execute(statement[connection.vendor])
        cursor.close()


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def server_questions(backend: Any) -> int | None:
    """MariaDB's count of statements received on the backend's (single) connection."""
    if backend.dialect.vendor != "mysql":
        return None
    rows = backend._run(lambda ex: ex.run("SHOW SESSION STATUS LIKE 'Questions'", {})).rows
    return int(rows[0][1])


def counted(backend: Any, action: Any) -> tuple[int, int, int | None]:
    """Round trips, statements (client) and statements (MariaDB server) of ``action()``."""
    questions = server_questions(backend)
    before = backend.traffic.snapshot()
    action()
    after = backend.traffic.snapshot()
    server = None
    if questions is not None:
        server = server_questions(backend) - questions - 1  # not the SHOW itself
    return after[0] - before[0], after[1] - before[1], server


RAW_FLOOR = {
    "postgresql": (
        "CREATE TABLE IF NOT EXISTS costs_floor (name varchar(128) PRIMARY KEY, fence bigint, holder text)",
        "INSERT INTO costs_floor VALUES ('x', 1, 'me') ON CONFLICT (name)"
        " DO UPDATE SET fence = costs_floor.fence + 1, holder = 'me' RETURNING fence",
        "UPDATE costs_floor SET holder = '' WHERE name = 'x'",
    ),
    "mysql": (
        "CREATE TABLE IF NOT EXISTS costs_floor"
        " (name varchar(128) PRIMARY KEY, fence bigint, holder varchar(32))",
        "INSERT INTO costs_floor VALUES ('x', 1, 'me')"
        " ON DUPLICATE KEY UPDATE fence = fence + 1, holder = 'me'",
        "UPDATE costs_floor SET holder = '' WHERE name = 'x'",
    ),
    "sqlite": (
        "CREATE TABLE IF NOT EXISTS costs_floor (name varchar(128) PRIMARY KEY, fence bigint, holder text)",
        "INSERT INTO costs_floor VALUES ('x', 1, 'me') ON CONFLICT (name)"
        " DO UPDATE SET fence = fence + 1, holder = 'me' RETURNING fence",
        "UPDATE costs_floor SET holder = '' WHERE name = 'x'",
    ),
}


def raw_floor_cycle(alias: str) -> Any:
    """The floor: the same driver, one connection, autocommit, two statements."""
    from django.db import connections

    wrapper = connections[alias]
    wrapper.ensure_connection()
    raw = wrapper.connection
    if alias == "sqlite":
        raw.isolation_level = None
    elif alias == "mysql":
        raw.autocommit(True)
    else:
        raw.autocommit = True
    create, take, free = RAW_FLOOR[alias]
    cursor = raw.cursor()
    cursor.execute(create)

    def cycle() -> None:
        cursor.execute(take)
        if cursor.description:
            cursor.fetchall()
        cursor.execute(free)

    return cycle


def timed_round(cycle: Any, cycles: int) -> tuple[float, float]:
    for _ in range(200):
        cycle()
    samples = []
    for _ in range(cycles):
        started = time.perf_counter()
        cycle()
        samples.append(time.perf_counter() - started)
    return percentile(samples, 0.5) * 1e6, percentile(samples, 0.99) * 1e6


def acquire_release(backend: Any, alias: str, cycles: int, rounds: int) -> dict[str, Any]:
    sid = backend.open_session(600, "costs").session_id
    name = f"costs.{uuid.uuid4().hex[:8]}"

    def cycle() -> None:
        assert backend.acquire(sid, name) is not None
        backend.release(sid, name)

    floor = raw_floor_cycle(alias)
    ours: list[tuple[float, float]] = []
    raw: list[tuple[float, float]] = []
    for round_number in range(rounds):
        order = [(cycle, ours), (floor, raw)]
        for timed, into in order if round_number % 2 == 0 else order[::-1]:
            into.append(timed_round(timed, cycles))
    acquire = counted(backend, lambda: backend.acquire(sid, name))
    release = counted(backend, lambda: backend.release(sid, name))
    backend.close_session(sid)
    return {
        "p50": statistics.median(p50 for p50, _ in ours),
        "p99": statistics.median(p99 for _, p99 in ours),
        "raw_p50": statistics.median(p50 for p50, _ in raw),
        "raw_p99": statistics.median(p99 for _, p99 in raw),
        "acquire": acquire,
        "release": release,
    }


def keep_alive(backend: Any, held: int) -> dict[str, Any]:
    sid = backend.open_session(600, "costs").session_id
    prefix = f"costs.{uuid.uuid4().hex[:8]}"
    for i in range(held):
        assert backend.acquire(sid, f"{prefix}.{i}") is not None
    for _ in range(2):
        backend.keep_alive(sid, 600)
    samples = []
    for _ in range(20):
        started = time.perf_counter()
        renewal = backend.keep_alive(sid, 600)
        samples.append(time.perf_counter() - started)
        assert len(renewal.owned) == held
    trips = counted(backend, lambda: backend.keep_alive(sid, 600))
    backend.close_session(sid)
    return {"median_ms": statistics.median(samples) * 1e3, "counts": trips}


def fmt_counts(counts: tuple[int, int, int | None]) -> str:
    trips, statements, server = counts
    text = f"{trips} RT / {statements} stmt"
    return text + (f" (server {server})" if server is not None else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-fsync", action="store_true", help="no commit flushes (PostgreSQL, SQLite)")
    arguments = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="simba-costs-"))
    configure(directory)
    create_databases()
    if arguments.no_fsync:
        from django.db.backends.signals import connection_created

        connection_created.connect(without_fsync)
    from django.core.management import call_command

    from django_simba.backends.database import AnyDatabaseBackend

    print("| database | acquire | release | acquire+release p50 / p99 µs | raw floor p50 / p99 µs |")
    print("|---|---|---|---|---|")
    keep_alive_rows = []
    for alias in ALIASES:
        call_command("migrate", "django_simba", database=alias, verbosity=0)
        # One idle connection at a time, so the server's counters are this connection's.
        backend = AnyDatabaseBackend.build({"alias": alias, "max_idle_connections": 1}, timeout=5)
        result = acquire_release(backend, alias, arguments.cycles, arguments.rounds)
        print(
            f"| {alias} | {fmt_counts(result['acquire'])} | {fmt_counts(result['release'])}"
            f" | {result['p50']:.0f} / {result['p99']:.0f}"
            f" | {result['raw_p50']:.0f} / {result['raw_p99']:.0f} |"
        )
        for held in (1, 100, 1000):
            measured = keep_alive(backend, held)
            keep_alive_rows.append((alias, held, measured))
        backend.close()
    print()
    print("| database | leases held | keep-alive | median ms |")
    print("|---|---|---|---|")
    for alias, held, measured in keep_alive_rows:
        print(f"| {alias} | {held} | {fmt_counts(measured['counts'])} | {measured['median_ms']:.2f} |")


if __name__ == "__main__":
    main()
