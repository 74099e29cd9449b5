"""The semaphore TCK on a standalone ZooKeeper: each permit has a line of sequential nodes, and a
waiting session is in every permit's line. Each engine and each other process has a client of its own."""

from __future__ import annotations

from typing import Any

import pytest

from django_simba.backends.zookeeper import ZookeeperBackend
from django_simba.testing import SemaphoreTCK
from tests.servers.zookeeper import ZookeeperNode

from .conftest import BACKEND_PATH, BackendFactory

pytestmark = pytest.mark.zookeeper


class TestSemaphoresOnZookeeper(SemaphoreTCK):
    @pytest.fixture
    def backend(self, zookeeper_server: ZookeeperNode, make_backend: BackendFactory) -> ZookeeperBackend:
        backend = make_backend(zookeeper_server.hosts)
        assert backend.hands_over
        return backend

    @pytest.fixture
    def other_backend(
        self, zookeeper_server: ZookeeperNode, make_backend: BackendFactory
    ) -> ZookeeperBackend:
        return make_backend(zookeeper_server.hosts)

    @pytest.fixture
    def backend_spec(self, zookeeper_server: ZookeeperNode) -> tuple[str, dict[str, Any]]:
        return BACKEND_PATH, {"options": {"hosts": zookeeper_server.hosts}, "timeout": 5}
