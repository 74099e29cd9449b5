"""PgBouncer processes the tests own: transaction pooling, on a free loopback port, stopped by PID.

Each one runs Debian's ``pgbouncer`` package in the foreground with a configuration of its own
in a temporary directory, in front of a PostgreSQL server given by host and port. Every
database name maps to the same name on that server (plus any entries given, e.g. one with a
``connect_query``). Authentication is ``trust``, as the test servers have on loopback.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from .ports import free_port
from .processes import stop

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
HOST = "127.0.0.1"
START_TIMEOUT = 15.0
#: PgBouncer refuses to run as root; started by root, it switches to this user.
RUN_AS = "postgres"


def ensure_installed() -> str | None:
    """Install PgBouncer from Debian when it is missing; return why it cannot run, or None."""
    if not Path(PGBOUNCER).exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600, check=False)
        subprocess.run(
            ["apt-get", "install", "-y", "pgbouncer"], env=env, capture_output=True, timeout=900, check=False
        )
    if not Path(PGBOUNCER).exists():
        return f"PgBouncer ({PGBOUNCER}) is not installed (apt-get install pgbouncer)"
    return None


@dataclass
class Pgbouncer:
    """A running PgBouncer: where clients connect, and its process."""

    port: int
    directory: Path
    process: subprocess.Popen[bytes]
    host: str = HOST

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, size: int = 3000) -> str:
        log = self.directory / "pgbouncer.log"
        return log.read_text(errors="replace")[-size:] if log.exists() else ""


def configuration(
    port: int,
    directory: Path,
    server_host: str,
    server_port: int,
    *,
    pool_size: int,
    databases: Mapping[str, str],
) -> str:
    entries = [f"{name} = {connection}" for name, connection in databases.items()]
    entries.append(f"* = host={server_host} port={server_port}")
    settings = {
        "listen_addr": HOST,
        "listen_port": port,
        "unix_socket_dir": "",
        "auth_type": "trust",
        "auth_file": directory / "userlist.txt",
        "pool_mode": "transaction",
        "default_pool_size": pool_size,
        "min_pool_size": 0,
        "max_client_conn": 2000,
        "server_check_delay": 0,  # a server connection back from a client is reused as it is
        "ignore_startup_parameters": "extra_float_digits",
        "logfile": directory / "pgbouncer.log",
        "log_connections": 0,
        "log_disconnections": 0,
    }
    lines = ["[databases]", *entries, "", "[pgbouncer]"]
    lines += [f"{key} = {value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def pgbouncer(
    server_host: str,
    server_port: int,
    users: list[str],
    *,
    pool_size: int = 5,
    databases: Mapping[str, str] | None = None,
) -> Iterator[Pgbouncer]:
    """A PgBouncer in transaction mode in front of ``server_host:server_port``, for ``users``."""
    reason = ensure_installed()
    if reason:
        raise RuntimeError(reason)
    directory = Path(tempfile.mkdtemp(prefix="simba-pgbouncer-"))
    port = free_port()
    config = directory / "pgbouncer.ini"
    (directory / "userlist.txt").write_text("".join(f'"{user}" ""\n' for user in users))
    config.write_text(
        configuration(
            port, directory, server_host, server_port, pool_size=pool_size, databases=databases or {}
        )
    )
    command = [PGBOUNCER, str(config)]
    if os.geteuid() == 0:
        shutil.chown(directory, RUN_AS)
        command[1:1] = ["-u", RUN_AS]
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    bouncer = Pgbouncer(port, directory, process)
    try:
        _wait_listening(bouncer)
        yield bouncer
    finally:
        stop(process)  # SIGTERM: PgBouncer's immediate shutdown
        if process.stderr is not None:
            process.stderr.close()
        shutil.rmtree(directory, ignore_errors=True)


def _wait_listening(bouncer: Pgbouncer) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if bouncer.process.poll() is not None:
            stderr = bouncer.process.stderr.read().decode() if bouncer.process.stderr else ""
            raise RuntimeError(f"pgbouncer exited: {stderr or bouncer.log_tail()}")
        with contextlib.suppress(OSError), socket.create_connection((HOST, bouncer.port), timeout=1):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"pgbouncer did not listen on {bouncer.port} within {START_TIMEOUT} s")
        time.sleep(0.02)
