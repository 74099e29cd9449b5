"""The semaphore TCK on a single Redis node (its release hands a permit to the next session in
line) and on a Redis Cluster (permits in other slots, no hand-over). Each engine and each other
process has a backend of its own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.testing import SemaphoreTCK
from tests.servers.redis_cluster import RedisClusterProcesses

from .conftest import BACKEND_PATH, built_backends


class TestSemaphoresOnRedis(SemaphoreTCK):
    pytestmark = pytest.mark.redis

    @pytest.fixture
    def options(self, shared_url: str) -> dict[str, Any]:
        return {"url": shared_url}

    @pytest.fixture
    def build(self, options: dict[str, Any]) -> Iterator[Callable[[], RedisBackend]]:
        yield from built_backends(options)

    @pytest.fixture
    def backend(self, build: Callable[[], RedisBackend]) -> RedisBackend:
        backend = build()
        assert backend.hands_over == (not backend.options.get("cluster"))
        return backend

    @pytest.fixture
    def other_backend(self, build: Callable[[], RedisBackend]) -> RedisBackend:
        return build()

    @pytest.fixture
    def backend_spec(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return BACKEND_PATH, {"options": options, "timeout": 5}


class TestSemaphoresOnRedisCluster(TestSemaphoresOnRedis):
    pytestmark = pytest.mark.redis_cluster

    @pytest.fixture
    def options(self, cluster: RedisClusterProcesses) -> dict[str, Any]:
        return {"url": cluster.url, "cluster": True}
