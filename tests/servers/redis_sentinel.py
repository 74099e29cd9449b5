"""A Redis primary, its replica and three Sentinels, all of the tests' own, on loopback.

The Sentinels watch the primary under one service name with short timings (down after 1 s), so
a primary killed with SIGKILL is replaced by its replica within seconds. Everything runs in a
temporary directory without persistence and is stopped by PID; the shared server on 6379 is
never touched.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import redis

from django_simba.testing.redis_fixtures import assume_nothing_lost

from .processes import ServerProcess
from .redis_cluster import HOST, REDIS_SERVER, RedisProcess, _wait, free_port

#: The service's name starts so; each set adds a suffix of its own, since django-redis keeps its
#: connection pools for the life of the process, keyed by the cache's URL (which names the service).
SERVICE = "simba-primary"
#: How long a primary may stay silent before a Sentinel calls it down (the default is 30 s). Well
#: above the Sentinels' one PING a second: at 1000 ms a Sentinel sometimes called the primary it had
#: just promoted down before its first PING there was answered, and failed over a second time.
DOWN_AFTER_MS = 1500
#: How long a failover may take before another Sentinel tries (the default is 3 minutes).
FAILOVER_TIMEOUT_MS = 6000


class SentinelProcess(ServerProcess):
    """One ``redis-server --sentinel`` on a free port, with its own (rewritable) config file."""

    def __init__(
        self,
        directory: Path,
        primary: RedisProcess,
        service: str,
        *,
        quorum: int,
        password: str | None,
        primary_password: str | None,
    ) -> None:
        self.directory = directory
        self.port = free_port()
        self.config = directory / f"sentinel-{self.port}.conf"
        lines = [
            f"port {self.port}",
            f"bind {HOST}",
            f"dir {directory}",
            "daemonize no",
            f"logfile {directory / f'sentinel-{self.port}.log'}",
            f"sentinel monitor {service} {HOST} {primary.port} {quorum}",
            f"sentinel down-after-milliseconds {service} {DOWN_AFTER_MS}",
            f"sentinel failover-timeout {service} {FAILOVER_TIMEOUT_MS}",
            f"sentinel parallel-syncs {service} 1",
        ]
        if password is not None:
            lines.append(f"requirepass {password}")
            lines.append(f"sentinel sentinel-pass {password}")  # the Sentinels talk to each other too
        if primary_password is not None:
            lines.append(f"sentinel auth-pass {service} {primary_password}")
        self.lines = lines
        self.password = password
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def address(self) -> tuple[str, int]:
        return (HOST, self.port)

    def start(self) -> SentinelProcess:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config.write_text("\n".join(self.lines) + "\n")  # Sentinel rewrites it as it learns
        self.process = subprocess.Popen(
            [REDIS_SERVER, str(self.config), "--sentinel"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        _wait(lambda: self.client().ping(), f"Sentinel on port {self.port}")
        return self

    def client(self) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port, password=self.password, socket_timeout=2,
                           decode_responses=True)  # fmt: skip


class SentinelSet:
    """A primary, ``replicas`` replicas of it and ``sentinels`` Sentinels watching it as ``service``."""

    def __init__(
        self,
        directory: Path,
        *,
        service: str | None = None,
        replicas: int = 1,
        sentinels: int = 3,
        sentinel_password: str | None = None,
        primary_password: str | None = None,
    ) -> None:
        self.directory = directory
        self.service = service or f"{SERVICE}-{uuid.uuid4().hex[:8]}"
        self.primary_password = primary_password
        auth: tuple[str, ...] = ()
        if primary_password is not None:
            auth = ("--requirepass", primary_password, "--masterauth", primary_password)
        # every server may become the primary: none waits before it sends a replica its first sync
        sync = ("--repl-diskless-sync-delay", "0")
        self.primary = RedisProcess(directory / "primary", *auth, *sync)
        self.replicas = [RedisProcess(directory / f"replica{i}", *auth, *sync) for i in range(replicas)]
        quorum = sentinels // 2 + 1
        self.sentinels = [
            SentinelProcess(directory / f"sentinel{i}", self.primary, self.service, quorum=quorum,
                            password=sentinel_password, primary_password=primary_password)
            for i in range(sentinels)
        ]  # fmt: skip

    @property
    def servers(self) -> list[RedisProcess]:
        return [self.primary, *self.replicas]

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """The Sentinels' addresses, as the backend's ``sentinels`` option takes them."""
        return [sentinel.address for sentinel in self.sentinels]

    def start(self) -> SentinelSet:
        try:
            self.primary.start()
            # A fresh primary is complete: no hold-back at the tests' first grant. The marker goes
            # to the AOF only, never to replicas, so a failover still holds grants back (docs/redis.rst).
            options = self.primary.backend_options()
            if self.primary_password is not None:
                options["password"] = self.primary_password
            assume_nothing_lost(options)
            for replica in self.replicas:
                replica.extra += ["--replicaof", HOST, str(self.primary.port)]
                replica.start()
            _wait(self._replicas_in_sync, "every replica in sync with the primary", timeout=30)
            for sentinel in self.sentinels:
                sentinel.start()
            _wait(self._sentinels_agree, "every Sentinel seeing the others and the replicas", timeout=30)
        except BaseException:
            self.stop()
            raise
        return self

    def server_client(self, server: RedisProcess) -> redis.Redis:
        return server.client(password=self.primary_password, decode_responses=True)

    def _replicas_in_sync(self) -> bool:
        """Every replica online (its first sync done) and acknowledging writes.

        A replica counts as connected while it still waits for its first sync: promoted then, it
        would have none of the data.
        """
        with self.server_client(self.primary) as client:
            info = client.info("replication")
            states = [info.get(f"slave{i}", {}).get("state") for i in range(len(self.replicas))]
            if states != ["online"] * len(self.replicas):
                return False
            client.set("simba-test:synced", 1)
            return int(client.wait(len(self.replicas), 100)) == len(self.replicas)

    def _sentinels_agree(self) -> bool:
        for sentinel in self.sentinels:
            with sentinel.client() as client:
                state = client.sentinel_master(self.service)
            if int(state["num-other-sentinels"]) != len(self.sentinels) - 1:
                return False
            if int(state["num-slaves"]) != len(self.replicas):
                return False
        return True

    def primary_address(self) -> tuple[str, int] | None:
        """The primary's address as a live Sentinel reports it (None while none answers)."""
        for sentinel in self.sentinels:
            if sentinel.process is None:
                continue
            try:
                with sentinel.client() as client:
                    host, port = client.sentinel_get_master_addr_by_name(self.service)
            except redis.RedisError:
                continue
            return (str(host), int(port))
        return None

    def kill_primary(self) -> RedisProcess:
        """SIGKILL the current primary; the one killed (its port tells which it was)."""
        address = self.primary_address()
        victim = next(server for server in self.servers if (HOST, server.port) == address)
        victim.kill()
        return victim

    def wait_for_new_primary(self, old: RedisProcess, timeout: float = 30.0) -> tuple[RedisProcess, float]:
        """Wait until the Sentinels name another primary and it accepts writes: it, and when that was seen."""

        def promoted() -> bool:
            address = self.primary_address()
            if address is None or address == (HOST, old.port):
                return False
            server = next(s for s in self.servers if (HOST, s.port) == address)
            with self.server_client(server) as client:
                return client.info("replication")["role"] == "master"

        _wait(promoted, "a replica promoted by the Sentinels", timeout=timeout)
        seen = time.monotonic()
        address = self.primary_address()
        return next(s for s in self.servers if (HOST, s.port) == address), seen

    def cut_replication(self) -> None:
        """The replicas hear nothing more from the current primary, which hears no acknowledgement.

        Each replica is given a wrong ``masterauth`` and its link is closed: every reconnection then
        fails its AUTH, as behind a partition. Its configured primary stays the same, so the Sentinels
        do not "fix" it (they point a replica whose primary differs from theirs back at it, which
        undid a proxy in the link in slow runs), and they may still promote it.
        """
        for replica in self.replicas:
            with self.server_client(replica) as client:
                client.config_set("masterauth", f"not-{uuid.uuid4().hex}")
        with self.server_client(self.primary) as client:
            client.client_kill_filter(_type="replica")
            _wait(lambda: int(client.info("replication")["connected_slaves"]) == 0, "replicas cut off")

    def heal_replication(self) -> None:
        """Undo :meth:`cut_replication` on the servers still alive, so that the Sentinels can attach
        the other replicas to the one they promote (call it once the cut-off primary is dead)."""
        for server in self.servers:
            if server.process is None or server.process.poll() is not None:
                continue
            with self.server_client(server) as client:
                client.config_set("masterauth", self.primary_password or "")

    def stop(self) -> None:
        for process in [*self.sentinels, *self.servers]:
            process.stop()


@contextlib.contextmanager
def redis_sentinel(**options: object) -> Iterator[SentinelSet]:
    """Start a primary, its replica and three Sentinels in a temporary directory; stop them by PID on exit."""
    with tempfile.TemporaryDirectory(prefix="simba-redis-sentinel-") as tmp:
        started = SentinelSet(Path(tmp), **options).start()  # type: ignore[arg-type]
        try:
            yield started
        finally:
            started.stop()
