"""A busy process keeps its session on ZooKeeper (see ``tests/busy_process.py``)."""

from __future__ import annotations

import pytest

from tests.busy_process import run_busy_process
from tests.servers.zookeeper import ZookeeperNode

from .conftest import BackendFactory

pytestmark = pytest.mark.zookeeper


def test_sixteen_busy_threads_lose_no_term(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory
) -> None:
    run = run_busy_process(make_backend(zookeeper_server.hosts))
    print(run.summary())
    run.assert_kept()
