"""A PostgreSQL server of the benchmark's own (``tests/servers/postgres.py``), with room for a fleet.

The fleet benchmark opens hundreds of connections, more than a shared server
allows (and than its other users would like): it runs its own server, with
the Debian package's binaries and the defaults apart from ``max_connections``,
and stops it by PID.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tests.servers.postgres import PostgresProcess, postgres_server

#: What the fleet benchmark reads of the server: ``host``, ``port``, ``user``, ``pid``.
OwnPostgres = PostgresProcess


@contextlib.contextmanager
def own_postgres(*, max_connections: int) -> Iterator[OwnPostgres]:
    with postgres_server({"max_connections": max_connections}) as server:
        yield server
