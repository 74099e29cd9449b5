"""The engine TCK on a standalone ZooKeeper; each engine has a backend (and a client) of its own."""

from __future__ import annotations

import pytest

from django_simba.backends.zookeeper import ZookeeperBackend
from django_simba.testing import EngineTCK
from tests.servers.zookeeper import ZookeeperNode

from .conftest import BackendFactory

pytestmark = pytest.mark.zookeeper


class TestEngineOnZookeeper(EngineTCK):
    @pytest.fixture
    def backend(self, zookeeper_server: ZookeeperNode, make_backend: BackendFactory) -> ZookeeperBackend:
        return make_backend(zookeeper_server.hosts)

    @pytest.fixture
    def other_backend(
        self, zookeeper_server: ZookeeperNode, make_backend: BackendFactory
    ) -> ZookeeperBackend:
        return make_backend(zookeeper_server.hosts)
