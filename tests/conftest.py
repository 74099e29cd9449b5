"""Shared test configuration.

Under CI (``SIMBA_REQUIRE_SERVERS=1``, set by ``.ci/test``) a missing server fails
the test that needs it; in a developer's partial local run it is skipped instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.servers.zookeeper import ZookeeperEnsemble, ZookeeperNode

REQUIRE_SERVERS = os.environ.get("SIMBA_REQUIRE_SERVERS") == "1"


def server_missing(what: str) -> None:
    """Call from a fixture when a server is unreachable: skip locally, fail under CI."""
    if REQUIRE_SERVERS:
        pytest.fail(f"{what} is not reachable, and SIMBA_REQUIRE_SERVERS=1 requires it", pytrace=False)
    pytest.skip(f"{what} is not reachable")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    """A failed test that used a ZooKeeper server reports the end of that server's log.

    The servers' directories are temporary, so without this a stall seen once in CI leaves nothing
    to read.
    """
    report = yield
    if report.failed:
        for node in _zookeeper_nodes(getattr(item, "funcargs", {}).values()):
            report.sections.append((f"ZooKeeper node {node.node_id} ({node.hosts}) log", node.log_tail(6000)))
    return report


def _zookeeper_nodes(values: Any) -> list[ZookeeperNode]:
    nodes: list[ZookeeperNode] = []
    for value in values:
        if isinstance(value, ZookeeperNode):
            nodes.append(value)
        elif isinstance(value, ZookeeperEnsemble):
            nodes.extend(value.nodes)
    return nodes
