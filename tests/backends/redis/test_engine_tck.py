"""The engine TCK on a single Redis node (the shared server) and on a Redis Cluster of three masters.

Each engine has a backend of its own, as each process would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.testing import EngineTCK
from tests.servers.redis_cluster import RedisClusterProcesses

from .conftest import built_backends


class TestEngineOnRedis(EngineTCK):
    pytestmark = pytest.mark.redis

    @pytest.fixture
    def build(self, shared_url: str) -> Iterator[Callable[[], RedisBackend]]:
        yield from built_backends({"url": shared_url})

    @pytest.fixture
    def backend(self, build: Callable[[], RedisBackend]) -> RedisBackend:
        return build()

    @pytest.fixture
    def other_backend(self, build: Callable[[], RedisBackend]) -> RedisBackend:
        return build()


class TestEngineOnRedisCluster(TestEngineOnRedis):
    pytestmark = pytest.mark.redis_cluster

    @pytest.fixture
    def build(self, cluster: RedisClusterProcesses) -> Iterator[Callable[[], RedisBackend]]:
        yield from built_backends({"startup_nodes": cluster.startup_nodes, "cluster": True})
