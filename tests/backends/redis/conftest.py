"""Fixtures of the Redis backend's tests.

The shared server (127.0.0.1:6379, ``SIMBA_REDIS_URL``) is used read-write on database 15
with fresh names per test, never flushed: other suites may use it at the same time. Tests
that restart, pause or reconfigure a server get one of their own (``own_redis``), and the
cluster tests share one 3-master cluster started for the session.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator

import pytest
import redis

from django_simba.backends.redis import RedisBackend
from tests.conftest import server_missing
from tests.servers.redis_cluster import (
    REDIS_CLI,
    REDIS_SERVER,
    RedisClusterProcesses,
    RedisProcess,
    redis_cluster,
)
from tests.servers.redis_cluster import redis_server as start_redis_server

SHARED_URL = os.environ.get("SIMBA_REDIS_URL", "redis://127.0.0.1:6379/15")
BACKEND_PATH = "django_simba.backends.redis.RedisBackend"


def _need_binaries() -> None:
    for binary in (REDIS_SERVER, REDIS_CLI):
        if not shutil.which(binary):
            server_missing(f"{binary} (to start Redis servers of the tests' own)")


@pytest.fixture(scope="session")
def shared_url() -> str:
    client = redis.Redis.from_url(SHARED_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError:
        server_missing(f"Redis at {SHARED_URL}")
    finally:
        client.close()
    return SHARED_URL


@pytest.fixture
def shared_backend(shared_url: str) -> Iterator[RedisBackend]:
    backend = RedisBackend({"url": shared_url}, timeout=5)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def cluster() -> Iterator[RedisClusterProcesses]:
    _need_binaries()
    with redis_cluster(masters=3) as started:
        yield started


@pytest.fixture
def cluster_backend(cluster: RedisClusterProcesses) -> Iterator[RedisBackend]:
    backend = RedisBackend({"startup_nodes": cluster.startup_nodes, "cluster": True}, timeout=5)
    yield backend
    backend.close()


@pytest.fixture
def own_redis() -> Iterator[RedisProcess]:
    """A redis-server of this test's own (no persistence), stopped by PID afterwards."""
    _need_binaries()
    with start_redis_server() as server:
        yield server


@pytest.fixture
def unique() -> str:
    return f"t.{uuid.uuid4().hex[:12]}"
