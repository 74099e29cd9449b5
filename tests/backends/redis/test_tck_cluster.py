"""The TCK on a Redis Cluster of three masters started by the fixtures (route by slot)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.testing import BackendTCK
from tests.servers.redis_cluster import RedisClusterProcesses

from .conftest import BACKEND_PATH

pytestmark = pytest.mark.redis_cluster


class TestRedisCluster(BackendTCK):
    lease_duration = 1.0

    @pytest.fixture
    def backend(self, cluster: RedisClusterProcesses) -> Iterator[RedisBackend]:
        backend = RedisBackend({"startup_nodes": cluster.startup_nodes, "cluster": True}, timeout=5)
        yield backend
        backend.close()

    @pytest.fixture
    def backend_spec(self, cluster: RedisClusterProcesses) -> tuple[str, dict[str, Any]]:
        options = {"url": cluster.url, "cluster": True}
        return BACKEND_PATH, {"options": options, "timeout": 5}
