"""What an idle name costs the database backend: the bytes of its lease row, and their reclaim.

Run from the repository root, with the test suite's servers on loopback::

    PYTHONPATH=. .venv/bin/python benchmarks/database_idle_rows.py [--names 20000]

Takes and releases N distinct names once each (as a project that locks ``invoice:{id}`` does),
measures what the lease table and its indexes grew by (PostgreSQL after a VACUUM: its size
once autovacuum has passed; MariaDB after ANALYZE TABLE; SQLite the file's pages in use),
then has the purge reclaim the rows (its idle and settle waits shortened, the floor's age moved
back) and reports the rows left, the time the reclaim took and the size after it. It works in
databases of its own (``simba_idle_rows`` on PostgreSQL and MariaDB, created when missing; a
SQLite file in a temporary directory).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.database_costs import ALIASES, configure, create_databases

DATABASE = "simba_idle_rows"

SIZE = {
    "postgresql": "SELECT pg_total_relation_size('simba_lease')",
    "mysql": "SELECT data_length + index_length FROM information_schema.tables"
    " WHERE table_schema = DATABASE() AND table_name = 'simba_lease'",
    "sqlite": "SELECT (SELECT page_count FROM pragma_page_count()) - (SELECT freelist_count FROM"
    " pragma_freelist_count())",
}


def table_bytes(alias: str) -> int:
    from django.db import connections

    connection = connections[alias]
    with connection.cursor() as cursor:
        if alias == "postgresql":
            cursor.execute("VACUUM simba_lease")
        elif alias == "mysql":
            cursor.execute("ANALYZE TABLE simba_lease")
            cursor.fetchall()
        cursor.execute(SIZE[alias])
        (size,) = cursor.fetchone()
        if alias == "sqlite":
            cursor.execute("PRAGMA page_size")
            size *= cursor.fetchone()[0]
    return int(size)


def lease_rows(alias: str) -> int:
    from django.db import connections

    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM simba_lease")
        return int(cursor.fetchone()[0])


def measure(alias: str, names: int) -> dict[str, Any]:
    from django.db import connections

    from django_simba.backends.database import AnyDatabaseBackend

    backend = AnyDatabaseBackend.build({"alias": alias}, timeout=30)
    session = backend.open_session(600, "idle rows").session_id
    empty = table_bytes(alias)
    prefix = f"invoice:{uuid.uuid4().hex[:8]}"
    for number in range(names):
        name = f"{prefix}:{number}"
        grant = backend.acquire(session, name)
        assert grant is not None
        backend.release(session, name, grant.token)
    grown = table_bytes(alias) - empty
    rows_before = lease_rows(alias)
    backend.reclaim_idle, backend.floor_settles = 0.0, 3600.0
    backend.reclaim_idle_leases()  # raises the floor over the idle rows
    with connections[alias].cursor() as cursor:  # as if the floor had been raised an hour ago
        cursor.execute("UPDATE simba_reclaim SET raised_at = raised_at - 3600001")
    started = time.perf_counter()
    while backend.reclaim_idle_leases():
        pass
    took = time.perf_counter() - started
    after = table_bytes(alias) - empty
    backend.close_session(session)
    backend.close()
    return {
        "per_name": grown / names,
        "rows": (rows_before, lease_rows(alias)),
        "reclaim_s": took,
        "after": after,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=20000)
    arguments = parser.parse_args()
    configure(Path(tempfile.mkdtemp(prefix="simba-idle-rows-")), DATABASE)
    create_databases(DATABASE)
    from django.core.management import call_command

    print(f"{arguments.names} names taken and released once each")
    print("| database | bytes per idle name | rows before / after the reclaim | reclaim s | bytes after |")
    print("|---|---|---|---|---|")
    for alias in ALIASES:
        call_command("migrate", "django_simba", database=alias, verbosity=0)
        result = measure(alias, arguments.names)
        before, after = result["rows"]
        print(
            f"| {alias} | {result['per_name']:.0f} | {before} / {after} | {result['reclaim_s']:.2f}"
            f" | {result['after']} |"
        )


if __name__ == "__main__":
    main()
