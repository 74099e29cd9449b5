"""Fixtures of the Redis backend's tests.

The shared server (127.0.0.1:6379, ``SIMBA_REDIS_URL``) is used read-write on database 15
with fresh names per test, never flushed: other suites may use it at the same time. Tests
that restart, pause or reconfigure a server get one of their own (``own_redis``, from
tests/conftest.py), and the cluster tests share one 3-master cluster started for the session.
Every server is marked as complete first (``assume_nothing_lost``), so that no test waits for the
hold-back of a new one.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
import redis

from django_simba.backends.redis import RedisBackend
from django_simba.spi import BackendUnavailable
from django_simba.testing.redis_fixtures import assume_nothing_lost
from tests.backends.building import closing_all
from tests.conftest import server_missing
from tests.servers.redis_cluster import (
    RedisClusterProcesses,
    need_redis_binaries,
    redis_cluster,
)

T = TypeVar("T")

SHARED_URL = os.environ.get("SIMBA_REDIS_URL", "redis://127.0.0.1:6379/15")
BACKEND_PATH = "django_simba.backends.redis.RedisBackend"


@pytest.fixture(scope="session")
def shared_url() -> str:
    client = redis.Redis.from_url(SHARED_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError:
        server_missing(f"Redis at {SHARED_URL}")
    finally:
        client.close()
    assume_nothing_lost(SHARED_URL)
    return SHARED_URL


@pytest.fixture
def raw(shared_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(shared_url, decode_responses=True)
    yield client
    client.close()


def built_backends(options: dict[str, object]) -> Iterator[Callable[[], RedisBackend]]:
    """For a fixture: a function that builds backends on ``options`` (one per engine, as per process),
    all closed when the fixture ends."""
    yield from closing_all(lambda: RedisBackend(options, timeout=5))


def once_reachable(call: Callable[[], T], timeout: float = 10) -> T:
    """Run ``call`` until it stops failing with BackendUnavailable (a pooled connection died)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except BackendUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.fixture
def shared_backend(shared_url: str) -> Iterator[RedisBackend]:
    backend = RedisBackend({"url": shared_url}, timeout=5)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def cluster() -> Iterator[RedisClusterProcesses]:
    need_redis_binaries()
    with redis_cluster(masters=3) as started:
        yield started


@pytest.fixture
def cluster_backend(cluster: RedisClusterProcesses) -> Iterator[RedisBackend]:
    backend = RedisBackend({"startup_nodes": cluster.startup_nodes, "cluster": True}, timeout=5)
    yield backend
    backend.close()


@pytest.fixture
def unique() -> str:
    return f"t.{uuid.uuid4().hex[:12]}"
