"""ZooKeeper servers for the whole test run (standalone and a 3-node ensemble), and backends on them.

The servers start once per run, on free loopback ports with a 100 ms tick, and are stopped by
PID at the end. Without ZooKeeper the tests are skipped locally and fail under
``SIMBA_REQUIRE_SERVERS=1``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from django_simba.backends.zookeeper import ZookeeperBackend, line
from tests.backends.building import closing_all
from tests.servers.zookeeper import (
    ZookeeperEnsemble,
    ZookeeperNode,
    serving,
    zookeeper_ensemble,
    zookeeper_standalone,
)

from .proxy import ZookeeperProxy, zookeeper_proxy

BACKEND_PATH = "django_simba.backends.zookeeper.ZookeeperBackend"
BackendFactory = Callable[..., ZookeeperBackend]


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZookeeperNode]:
    with serving(zookeeper_standalone, "a standalone ZooKeeper") as server:
        yield server


@pytest.fixture(scope="session")
def zookeeper_cluster() -> Iterator[ZookeeperEnsemble]:
    with serving(zookeeper_ensemble, "a 3-node ZooKeeper ensemble") as ensemble:
        yield ensemble


@contextlib.contextmanager
def kazoo_client(hosts: str, auth: list[tuple[str, str]] | None = None) -> Iterator[KazooClient]:
    """A plain kazoo client (with ``auth``, those credentials), stopped on exit."""
    client = KazooClient(hosts=hosts, auth_data=auth)
    client.start(10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def raw(zookeeper_server: ZookeeperNode) -> Iterator[KazooClient]:
    """A plain kazoo client on the standalone server, without credentials, to see what was
    really applied (or to act as another client would: an intruder, an earlier run)."""
    with kazoo_client(zookeeper_server.hosts) as client:
        yield client


@pytest.fixture
def name() -> str:
    """A lease or group name nobody used before."""
    return f"name.{uuid.uuid4().hex[:12]}"


@pytest.fixture
def root() -> str:
    """A root of the test's own: nothing made there before, by this test or an earlier one."""
    return f"/simba-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def proxy(zookeeper_server: ZookeeperNode) -> Iterator[ZookeeperProxy]:
    """A TCP proxy in front of the standalone server, to drop or mute the connection."""
    with zookeeper_proxy(zookeeper_server.client_port) as proxy:
        yield proxy


@pytest.fixture
def make_backend() -> Iterator[BackendFactory]:
    """Build backends (``make_backend(hosts, timeout=..., **options)``), all closed after the test."""

    def build(hosts: str, *, timeout: float = 5.0, **options: Any) -> ZookeeperBackend:
        return ZookeeperBackend({"hosts": hosts, **options}, timeout=timeout)

    yield from closing_all(build)


def held_node(raw: KazooClient, name: str, root: str = "/simba") -> tuple[str, bytes, Any] | None:
    """The path, data and stat of the node holding ``name`` (the first of its line), or ``None``."""
    directory = f"{root}/leases/{name}"
    while True:
        try:
            first = line.head(raw.get_children(directory))
        except NoNodeError:
            return None  # no line: nobody ever asked, or the server removed the empty container
        if first is None:
            return None
        try:
            data, stat = raw.get(f"{directory}/{first}")
        except NoNodeError:
            continue  # released while we looked
        return f"{directory}/{first}", data, stat
