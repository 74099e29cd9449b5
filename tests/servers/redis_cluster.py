"""Redis servers the tests own: a lone ``redis-server`` and a 3-master Redis Cluster.

Everything runs on loopback ports found free at start, in a temporary directory, without
persistence, and is stopped by PID. The shared server on 6379 is never touched by these helpers:
tests that restart, pause or reconfigure a server use one of these.

A new server holds the backend's first grant back for a lease, as after a data loss (it cannot
tell the two apart): the helpers mark the servers they start as complete
(``assume_nothing_lost``), so that tests do not wait. A restart (``RedisProcess.restart``) loses
the mark like any other data, which is what the tests of that rule need.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import redis

from django_simba.testing.redis_fixtures import assume_nothing_lost

from . import ports
from .processes import ServerProcess

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
HOST = "127.0.0.1"
START_TIMEOUT = 15.0


def need_redis_binaries() -> None:
    """Skip (locally) or fail (under CI) a test that starts Redis servers when the binaries are missing."""
    from tests.conftest import server_missing

    for binary in (REDIS_SERVER, REDIS_CLI):
        if not shutil.which(binary):
            server_missing(f"{binary} (to start Redis servers of the tests' own)")


def free_port(*, with_bus: bool = False) -> int:
    """A loopback port that is free now (and, for cluster nodes, whose bus port +10000 is free too)."""
    for _ in range(100):
        port = ports.free_port(HOST)
        if port > 55000:
            continue  # the cluster bus port would not exist
        if not with_bus or _is_free(port + 10000):
            return port
    raise RuntimeError("no free loopback port found")


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
        return True


def _wait(condition: Callable[[], bool], what: str, timeout: float = START_TIMEOUT) -> None:
    """Poll ``condition`` until true; connection errors mean "not yet"; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except (redis.RedisError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not reached within {timeout} s")
        time.sleep(0.02)


@dataclass(frozen=True)
class TlsFiles:
    """A throw-away CA and a server certificate for 127.0.0.1, made with the openssl command."""

    ca: Path
    cert: Path
    key: Path

    @classmethod
    def create(cls, directory: Path) -> TlsFiles:
        directory.mkdir(parents=True, exist_ok=True)
        ca, ca_key = directory / "ca.crt", directory / "ca.key"
        cert, key, csr = directory / "server.crt", directory / "server.key", directory / "server.csr"
        extensions = directory / "san.ext"
        extensions.write_text(f"subjectAltName=IP:{HOST}\n")
        openssl = shutil.which("openssl") or "/usr/bin/openssl"
        for args in (
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca, "-days", "1",
             "-subj", "/CN=simba-test-ca"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", f"/CN={HOST}"],
            ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
             "-days", "1", "-extfile", extensions],
        ):  # fmt: skip
            subprocess.run([openssl, *map(str, args)], check=True, capture_output=True, timeout=60)
        return cls(ca, cert, key)


class RedisProcess(ServerProcess):
    """One ``redis-server`` process on a free loopback port, in its own directory, stopped by PID."""

    def __init__(
        self,
        directory: Path,
        *extra: str,
        port: int | None = None,
        cluster: bool = False,
        tls: TlsFiles | None = None,
    ) -> None:
        self.directory = directory
        self.port = port or free_port(with_bus=cluster)
        self.cluster = cluster
        self.tls = tls
        self.extra = list(extra)
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def url(self) -> str:
        return f"{'rediss' if self.tls else 'redis'}://{HOST}:{self.port}/0"

    def command_line(self) -> list[str]:
        ports = ["--port", str(self.port)]
        if self.tls is not None:
            ports = [
                "--port", "0", "--tls-port", str(self.port),
                "--tls-cert-file", str(self.tls.cert), "--tls-key-file", str(self.tls.key),
                "--tls-ca-cert-file", str(self.tls.ca), "--tls-auth-clients", "no",
            ]  # fmt: skip
        args = [
            REDIS_SERVER,
            *ports,
            "--bind", HOST,
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",
            "--logfile", str(self.directory / f"redis-{self.port}.log"),
        ]  # fmt: skip
        if self.cluster:
            args += [
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(self.directory / f"nodes-{self.port}.conf"),
                "--cluster-node-timeout", "5000",
            ]  # fmt: skip
        return args + self.extra

    def start(self) -> RedisProcess:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            self.command_line(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self.paused = False
        _wait(self._answers, f"redis-server on port {self.port}")
        return self

    def _answers(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            stderr = self.process.stderr.read().decode() if self.process.stderr else ""
            raise RuntimeError(f"redis-server on port {self.port} exited: {stderr or self._log_tail()}")
        with socket.create_connection((HOST, self.port), timeout=1) as raw:
            conn = raw
            if self.tls is not None:
                conn = ssl.create_default_context(cafile=str(self.tls.ca)).wrap_socket(
                    raw, server_hostname=HOST
                )
            conn.sendall(b"PING\r\n")
            reply = conn.recv(64)
        # a server with requirepass answers NOAUTH: it is up all the same
        return reply.startswith((b"+PONG", b"-NOAUTH"))

    def _log_tail(self) -> str:
        log = self.directory / f"redis-{self.port}.log"
        return log.read_text()[-2000:] if log.exists() else ""

    def backend_options(self) -> dict[str, object]:
        """The backend's OPTIONS for this server (eviction not checked: some tests set a policy)."""
        options: dict[str, object] = {"url": self.url, "check_eviction": False}
        if self.tls is not None:
            options["ssl_ca_certs"] = str(self.tls.ca)
        return options

    def client(self, **kwargs: object) -> redis.Redis:
        if self.tls is not None:
            kwargs = {"ssl": True, "ssl_ca_certs": str(self.tls.ca), **kwargs}
        return redis.Redis(host=HOST, port=self.port, socket_timeout=5, **kwargs)  # type: ignore[arg-type]

    def restart(self) -> None:
        """Stop and start again on the same port: without persistence every key is gone."""
        self.stop()
        self.start()


class RedisClusterProcesses:
    """A Redis Cluster of three masters (no replicas) on loopback, created with ``redis-cli --cluster``."""

    def __init__(self, directory: Path, masters: int = 3) -> None:
        self.directory = directory
        self.nodes = [RedisProcess(directory / f"node{i}", cluster=True) for i in range(masters)]

    @property
    def startup_nodes(self) -> list[str]:
        return [f"{HOST}:{node.port}" for node in self.nodes]

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.nodes[0].port}"

    def start(self) -> RedisClusterProcesses:
        try:
            for node in self.nodes:
                node.start()
            created = subprocess.run(
                [
                    REDIS_CLI,
                    "--cluster",
                    "create",
                    *self.startup_nodes,
                    "--cluster-replicas",
                    "0",
                    "--cluster-yes",
                ],
                capture_output=True,
                timeout=60,
                check=False,
            )
            if created.returncode != 0:
                raise RuntimeError(
                    f"redis-cli --cluster create failed: {created.stdout!r} {created.stderr!r}"
                )
            _wait(self._ready, "cluster_state:ok on every node", timeout=30)
            assume_nothing_lost({"startup_nodes": self.startup_nodes, "cluster": True})
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        for node in self.nodes:
            with node.client(decode_responses=True) as client:
                info = client.execute_command("CLUSTER", "INFO")
                text = info if isinstance(info, str) else str(info)
                if "cluster_state:ok" not in text or f"cluster_known_nodes:{len(self.nodes)}" not in text:
                    return False
        return True

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


@contextlib.contextmanager
def redis_cluster(masters: int = 3) -> Iterator[RedisClusterProcesses]:
    """Start a cluster in a temporary directory; stop its processes by PID on exit."""
    with tempfile.TemporaryDirectory(prefix="simba-redis-cluster-") as tmp:
        cluster = RedisClusterProcesses(Path(tmp), masters).start()
        try:
            yield cluster
        finally:
            cluster.stop()


@contextlib.contextmanager
def redis_server(*extra: str, tls: bool = False, marked: bool = True) -> Iterator[RedisProcess]:
    """Start a lone redis-server (extra command-line arguments appended); stop it by PID on exit.

    ``marked``: mark it as complete (a replica, or a server that wants a password, cannot be).
    """
    with tempfile.TemporaryDirectory(prefix="simba-redis-") as tmp:
        files = TlsFiles.create(Path(tmp) / "tls") if tls else None
        server = RedisProcess(Path(tmp), *extra, tls=files).start()
        try:
            if marked:
                assume_nothing_lost(server.backend_options())
            yield server
        finally:
            server.stop()
