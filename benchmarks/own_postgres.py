"""A PostgreSQL server of the benchmark's own: initdb in a temporary directory, a free loopback port.

The fleet benchmark opens hundreds of connections, more than a shared server
allows (and than its other users would like): it runs its own server, with
the Debian package's binaries and the defaults apart from ``max_connections``,
and stops it by PID. Started by root, the server runs as the ``postgres`` user.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.servers.processes import stop

HOST = "127.0.0.1"
SUPERUSER = "simba"
RUN_AS = "postgres"
START_TIMEOUT = 30.0


def binaries() -> Path:
    """The newest installed server's bin directory (Debian: /usr/lib/postgresql/<major>/bin)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
    if not found:
        raise RuntimeError(
            "no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)"
        )
    return found[-1].parent


@dataclass(frozen=True)
class OwnPostgres:
    port: int
    process: subprocess.Popen[bytes]
    host: str = HOST
    user: str = SUPERUSER

    @property
    def pid(self) -> int:
        return self.process.pid


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def own_postgres(*, max_connections: int) -> Iterator[OwnPostgres]:
    bin_dir = binaries()
    directory = Path(tempfile.mkdtemp(prefix="simba-bench-pg-"))
    data = directory / "data"
    as_user: dict[str, str] = {}
    if os.geteuid() == 0:  # postgres refuses to run as root
        shutil.chown(directory, RUN_AS)
        as_user = {"user": RUN_AS, "group": RUN_AS}
    try:
        subprocess.run(
            [bin_dir / "initdb", "-D", data, "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync"],
            check=True,
            capture_output=True,
            timeout=120,
            **as_user,  # type: ignore[arg-type]
        )
        port = _free_port()
        settings = {
            "listen_addresses": HOST,
            "port": port,
            "unix_socket_directories": directory,
            "max_connections": max_connections,
            "logging_collector": "off",
        }
        arguments = [item for key, value in settings.items() for item in ("-c", f"{key}={value}")]
        with (directory / "server.log").open("wb") as log:
            process = subprocess.Popen(
                [bin_dir / "postgres", "-D", data, *arguments],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                **as_user,  # type: ignore[arg-type]
            )
        server = OwnPostgres(port, process)
        try:
            _wait_ready(server, directory)
            yield server
        finally:
            stop(process, signal.SIGINT, timeout=30)  # PostgreSQL's fast shutdown
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _wait_ready(server: OwnPostgres, directory: Path) -> None:
    import psycopg

    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"postgres exited: {(directory / 'server.log').read_text()[-2000:]}")
        try:
            psycopg.connect(
                host=HOST, port=server.port, user=SUPERUSER, dbname="postgres", connect_timeout=2
            ).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
