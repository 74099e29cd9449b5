"""ZooKeeper servers the tests own: a standalone server and a 3-node ensemble.

Every server runs the Debian ``zookeeper`` package's jar on free loopback ports with a zoo.cfg of
its own in a temporary directory (data, myid and the server's log live there too), a tick of
100 ms so session timeouts can be short, and is stopped by PID. ``ensure_installed()`` installs
the package on a fresh CI machine when we are root.

The transaction log is not fsynced (``forceSync=no``) unless a caller's ``extra_config`` says so.

Session timeouts: ``minSessionTimeout`` is 2 ticks (200 ms) and ``maxSessionTimeout`` 60 s, so a
session asks for its lease and gets it (the TCK renews 20 s leases and expects about 20 s back).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .ports import free_port
from .processes import ServerProcess

HOST = "127.0.0.1"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
CONF_DIR = Path("/etc/zookeeper/conf")
# Optional: an SLF4J binding gives the server a log (in its own directory); without one it logs nothing.
LOG_JARS = (Path("/usr/share/java/slf4j-simple.jar"),)
# The Netty server (TLS) needs the codec and resolver jars that the zookeeper jar's manifest omits.
NETTY_JARS = (Path("/usr/share/java/netty-codec.jar"), Path("/usr/share/java/netty-resolver.jar"))
STANDALONE_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
TICK_MS = 100
START_TIMEOUT = 40.0
JVM_OPTIONS = (
    "-Xms16m",
    "-Xmx192m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",  # starts faster; these servers never run long
    "-Djava.net.preferIPv4Stack=true",
    "-Dzookeeper.admin.enableServer=false",
    "-Dzookeeper.jmx.log4j.disable=true",
    "-Dznode.container.checkIntervalMs=500",  # empty group containers go within a second
    "-Dznode.container.maxPerMinute=600000",  # ... even when a test run left thousands of empty lines
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
)


def ensure_installed() -> str | None:
    """Install ZooKeeper from Debian when its jar is missing; return why it cannot run, or None."""
    if not ZOOKEEPER_JAR.exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600, check=False)
        subprocess.run(
            ["apt-get", "install", "-y", "zookeeper"], env=env, capture_output=True, timeout=900, check=False
        )
    if not ZOOKEEPER_JAR.exists():
        return f"ZooKeeper ({ZOOKEEPER_JAR}) is not installed (apt-get install zookeeper)"
    if shutil.which("java") is None:
        return "java is not installed"
    return None


def four_letter(port: int, command: str, timeout: float = 2.0) -> str:
    """Send a four-letter command (``srvr``, ``mntr``...) and return the whole answer."""
    with socket.create_connection((HOST, port), timeout=timeout) as conn:
        conn.sendall(command.encode())
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def monitor(port: int) -> dict[str, str]:
    """The server's ``mntr`` counters (``zk_packets_received``, ``zk_server_state``...)."""
    found = {}
    for line in four_letter(port, "mntr").splitlines():
        key, _, value = line.partition("\t")
        if value:
            found[key] = value
    return found


class ZookeeperNode(ServerProcess):
    """One ZooKeeper server process: standalone, or a member of an ensemble."""

    def __init__(
        self,
        directory: Path,
        *,
        node_id: int = 0,
        peers: Sequence[tuple[int, int, int]] = (),
        extra_config: dict[str, str] | None = None,
        jvm_options: Sequence[str] = (),
    ) -> None:
        self.directory = directory
        self.node_id = node_id
        self.peers = list(peers)  # (id, quorum port, election port) of every member, self included
        self.client_port = free_port()
        self.extra_config = dict(extra_config or {})
        self.jvm_options = list(jvm_options)
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def hosts(self) -> str:
        return f"{HOST}:{self.client_port}"

    @property
    def config_path(self) -> Path:
        return self.directory / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def write_config(self) -> None:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = {
            "tickTime": str(TICK_MS),
            "dataDir": str(data),
            "clientPort": str(self.client_port),
            "clientPortAddress": HOST,
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "*",
            "minSessionTimeout": str(2 * TICK_MS),
            "maxSessionTimeout": "60000",
            "maxClientCnxns": "0",
            "autopurge.purgeInterval": "0",
            # No fsync of the transaction log: the tests kill and restart processes, never the
            # machine, and a write stuck behind a slow fsync of a busy disk held a sync for over
            # 5 s once (the benchmark asks for "yes", as production runs).
            "forceSync": "no",
        }
        if self.peers:
            config.update({"initLimit": "50", "syncLimit": "20", "cnxTimeout": "500"})
            for peer_id, quorum_port, election_port in self.peers:
                config[f"server.{peer_id}"] = f"{HOST}:{quorum_port}:{election_port}"
            (data / "myid").write_text(f"{self.node_id}\n")
        config.update(self.extra_config)
        self.config_path.write_text("".join(f"{key}={value}\n" for key, value in config.items()))

    def command_line(self) -> list[str]:
        classpath = [str(CONF_DIR), str(ZOOKEEPER_JAR)]
        classpath += [str(jar) for jar in (*LOG_JARS, *NETTY_JARS) if jar.exists()]
        main = QUORUM_MAIN if self.peers else STANDALONE_MAIN
        return [
            "java",
            *JVM_OPTIONS,
            *self.jvm_options,
            "-cp",
            ":".join(classpath),
            main,
            str(self.config_path),
        ]

    def start(self, *, wait: bool = True) -> ZookeeperNode:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.write_config()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command_line(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                start_new_session=True,  # a Ctrl-C of the test run reaches pytest, which stops us by PID
            )
        self.paused = False
        if wait:
            self.wait_serving()
        return self

    def mode(self) -> str:
        """``standalone``, ``leader`` or ``follower`` while serving; '' when not serving or down."""
        try:
            answer = four_letter(self.client_port, "srvr", timeout=1.0)
        except OSError:
            return ""
        for line in answer.splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return ""

    def wait_serving(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not self.mode():
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"ZooKeeper on port {self.client_port} exited: {self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"ZooKeeper on port {self.client_port} not serving: {self.log_tail()}")
            time.sleep(0.05)

    def log_tail(self, size: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-size:] if self.log_path.exists() else ""

    def restart(self, *, crash: bool = False) -> None:
        """Stop (or kill) and start again on the same ports, with the same data directory."""
        if crash:
            self.kill()
        else:
            self.stop()
        self.start()


class ZookeeperEnsemble:
    """Three (or more) QuorumPeerMain processes on loopback forming one ensemble."""

    def __init__(self, directory: Path, size: int = 3) -> None:
        peers = [(i, free_port(), free_port()) for i in range(1, size + 1)]
        self.nodes = [ZookeeperNode(directory / f"node{i}", node_id=i, peers=peers) for i, _, _ in peers]

    @property
    def hosts(self) -> str:
        return ",".join(node.hosts for node in self.nodes)

    def start(self) -> ZookeeperEnsemble:
        try:
            for node in self.nodes:
                node.start(wait=False)
            self.wait_quorum()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_quorum(self, timeout: float = START_TIMEOUT) -> None:
        """Wait until every node serves and exactly one of them leads."""
        deadline = time.monotonic() + timeout
        while True:
            modes = [node.mode() for node in self.nodes]
            if all(modes) and modes.count("leader") == 1:
                return
            for node in self.nodes:
                if node.process is not None and node.process.poll() is not None:
                    raise RuntimeError(f"ZooKeeper node {node.node_id} exited: {node.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"ensemble not serving within {timeout} s (modes {modes})")
            time.sleep(0.05)

    def leader(self) -> ZookeeperNode:
        for node in self.nodes:
            if node.mode() == "leader":
                return node
        raise RuntimeError("the ensemble has no leader")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


@contextlib.contextmanager
def zookeeper_standalone(**kwargs: object) -> Iterator[ZookeeperNode]:
    """Start a standalone server in a temporary directory; stop it by PID on exit."""
    with tempfile.TemporaryDirectory(prefix="simba-zookeeper-") as tmp:
        server = ZookeeperNode(Path(tmp), **kwargs)  # type: ignore[arg-type]
        try:
            server.start()
            yield server
        finally:
            server.stop()


#: Whom each certificate make_certificates signs names (its subjectAltName).
CERTIFICATE_NAMES = {
    "server": "IP:127.0.0.1,DNS:localhost",
    "client": "IP:127.0.0.1,DNS:localhost",
    "evil": "DNS:evil.example",  # signed by the same CA, for a host the clients never dial
}


def make_certificates(directory: Path) -> dict[str, str]:
    """A throw-away CA and, signed by it, certificates (openssl): a server's for 127.0.0.1 and
    localhost, a client's, and ``evil``, a server's for ``evil.example``.

    Returns the PEM files: ``ca``, ``client``, ``client_key``, ``evil``, ``evil_key``, and the
    key stores ZooKeeper reads (key and certificate in one file): ``server-store``, ``evil-store``.
    """
    if shutil.which("openssl") is None:
        raise RuntimeError("openssl is not installed")
    directory.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, capture_output=True, check=True, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "2", "-subj", "/CN=simba-test-ca")  # fmt: skip
    for who, names in CERTIFICATE_NAMES.items():
        (directory / f"{who}.cnf").write_text(f"subjectAltName={names}\n")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{who}.key", "-out", f"{who}.csr",
                "-subj", f"/CN=simba-{who}")  # fmt: skip
        openssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{who}.pem", "-days", "2", "-extfile", f"{who}.cnf")  # fmt: skip
    for who in ("server", "evil"):
        # ZooKeeper's PEM key store wants the key and the certificate in one file
        (directory / f"{who}-store.pem").write_text(
            (directory / f"{who}.key").read_text() + (directory / f"{who}.pem").read_text()
        )
    pems = ("ca", "client", "evil", "server-store", "evil-store")
    return {name: str(directory / f"{name}.pem") for name in pems} | {
        "client_key": str(directory / "client.key"),
        "evil_key": str(directory / "evil.key"),
    }


@contextlib.contextmanager
def zookeeper_tls(identity: str = "server") -> Iterator[tuple[ZookeeperNode, int, dict[str, str]]]:
    """A standalone server with a TLS client port that requires client certificates.

    ``identity`` is the certificate it presents (``make_certificates``): ``"server"`` names
    127.0.0.1 and localhost, ``"evil"`` names evil.example only. Yields the server, its TLS port
    and the PEM files (``ca``, ``client``, ``client_key``...).
    """
    with tempfile.TemporaryDirectory(prefix="simba-zookeeper-tls-") as tmp:
        files = make_certificates(Path(tmp) / "certs")
        secure_port = free_port()
        config = {
            "secureClientPort": str(secure_port),
            "secureClientPortAddress": HOST,
            "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
            "ssl.keyStore.location": files[f"{identity}-store"],
            "ssl.keyStore.type": "PEM",
            "ssl.trustStore.location": files["ca"],
            "ssl.trustStore.type": "PEM",
            "ssl.clientAuth": "need",
        }
        server = ZookeeperNode(Path(tmp) / "server", extra_config=config)
        try:
            server.start()
            yield server, secure_port, files
        finally:
            server.stop()


@contextlib.contextmanager
def zookeeper_ensemble(size: int = 3) -> Iterator[ZookeeperEnsemble]:
    """Start an ensemble in a temporary directory; stop its processes by PID on exit."""
    with tempfile.TemporaryDirectory(prefix="simba-zookeeper-ensemble-") as tmp:
        ensemble = ZookeeperEnsemble(Path(tmp), size).start()
        try:
            yield ensemble
        finally:
            ensemble.stop()


@contextlib.contextmanager
def serving(start: Callable[[], contextlib.AbstractContextManager[Any]], what: str) -> Iterator[Any]:
    """For a fixture: the server ``start`` gives, or the run told that ``what`` is missing."""
    from tests.conftest import server_missing

    reason = ensure_installed()
    if reason:
        server_missing(reason)
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(start())
        except RuntimeError as error:
            server_missing(f"{what} ({error})")
        yield server
