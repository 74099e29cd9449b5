"""A PostgreSQL server of the tests' own (and the benchmarks'): initdb in a temporary directory.

The shared server on 5432 is never restarted: a test that restarts PostgreSQL, or needs more
connections than a shared server allows, starts one of these with the Debian package's binaries
on a free loopback port, trust authentication, and stops it by PID. PostgreSQL refuses to run as
root, so under root the server runs as the ``postgres`` user.

``crash_restart`` is what a crash does: an immediate shutdown (SIGQUIT: no checkpoint, every
connection cut), then a start that replays the WAL; every committed transaction survives.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from .ports import free_port
from .processes import ServerProcess, stop

HOST = "127.0.0.1"
SUPERUSER = "simba"
RUN_AS = "postgres"
START_TIMEOUT = 30.0
FAST = ("--no-sync",)  # initdb's files need no fsync: the directory is thrown away


def binaries() -> Path:
    """The newest installed server's bin directory (Debian: /usr/lib/postgresql/<major>/bin)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
    if not found:
        raise RuntimeError(
            "no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)"
        )
    return found[-1].parent


class PostgresProcess(ServerProcess):
    """One postgres server on a data directory of its own; started, crashed and stopped by PID."""

    host = HOST
    user = SUPERUSER

    def __init__(self, directory: Path, settings: Mapping[str, object] | None = None) -> None:
        self.directory = directory
        self.data = directory / "data"
        self.port = free_port(HOST)
        self.settings = dict(settings or {})
        self.bin = binaries()
        self._as_user: dict[str, str] = {}
        if os.geteuid() == 0:  # postgres refuses to run as root
            shutil.chown(directory, RUN_AS)
            self._as_user = {"user": RUN_AS, "group": RUN_AS}

    def init(self) -> PostgresProcess:
        subprocess.run(
            [self.bin / "initdb", "-D", self.data, "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", *FAST],
            check=True,
            capture_output=True,
            timeout=120,
            **self._as_user,  # type: ignore[arg-type]
        )
        return self

    def dsn(self, database: str) -> str:
        return f"host={HOST} port={self.port} user={SUPERUSER} dbname={database}"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def start(self) -> PostgresProcess:
        settings = {
            "listen_addresses": HOST,
            "port": self.port,
            "unix_socket_directories": self.directory,
            "logging_collector": "off",
            **self.settings,
        }
        arguments = [item for key, value in settings.items() for item in ("-c", f"{key}={value}")]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [self.bin / "postgres", "-D", self.data, *arguments],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                **self._as_user,  # type: ignore[arg-type]
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"postgres exited: {self.log_path.read_text()[-2000:]}")
            try:
                with psycopg.connect(self.dsn("postgres"), connect_timeout=2):
                    pass
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        """Fast shutdown (SIGINT: connections are cut, a checkpoint is written)."""
        process, self.process = self.process, None
        if process is not None:
            if self.paused:
                os.kill(process.pid, signal.SIGCONT)
            stop(process, signal.SIGINT, timeout=30)
        self.paused = False

    def crash_restart(self) -> None:
        """An immediate shutdown, as after a crash, then a start that replays the WAL."""
        process, self.process = self.process, None
        if process is not None:
            stop(process, signal.SIGQUIT, timeout=30)
        self.start()


@contextlib.contextmanager
def postgres_server(settings: Mapping[str, object] | None = None) -> Iterator[PostgresProcess]:
    """initdb and start a server in a temporary directory; stop it by PID and remove it on exit."""
    directory = Path(tempfile.mkdtemp(prefix="simba-pg-"))
    try:
        server = PostgresProcess(directory, settings).init().start()
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
