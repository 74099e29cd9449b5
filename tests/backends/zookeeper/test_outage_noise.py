"""A ZooKeeper outage is told as docs/observability.rst promises, not in kazoo's retry lines."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from django_simba.backends.zookeeper import ZookeeperBackend
from django_simba.backends.zookeeper.chatter import KAZOO_LOGGER
from django_simba.engine import Election, Engine, EngineConfig
from django_simba.spi import BackendTimeout
from tests.outages import sit_through_an_outage, told_once_each
from tests.servers.zookeeper import ZookeeperNode, serving, zookeeper_standalone

#: Every WARNING a 16 s outage is worth, each once: the engine's outage, and its session's loss.
WARNINGS = {
    "engine down": r"failed: .* \(further failures are counted until the zookeeper backend answers again\)$",
    "engine back": r"^django-simba: the zookeeper backend answers again after 1\d s \(",
    "session lost": r"^django-simba: session \w+ passed its local deadline$",
    "session closed": r"^django-simba: ZooKeeper session \w+ was not kept alive: closing it$",
}


@pytest.fixture
def own_zookeeper() -> Iterator[ZookeeperNode]:
    """A standalone ZooKeeper of this test's own: it is stopped and started again."""
    with serving(zookeeper_standalone, "a standalone ZooKeeper") as server:
        yield server


def test_a_16_s_outage_is_the_engines_lines_not_kazoos_retries(own_zookeeper, caplog):
    """kazoo logged a WARNING for each failed connection attempt of each client: 142 in such an outage."""

    def recovered(engine: Engine, election: Election) -> bool:
        if not (engine.backend.notifying and engine.session_id is not None):
            return False
        # and a call sent during the outage that fails late has failed by now
        back_at = back.setdefault("at", time.monotonic())
        return time.monotonic() - back_at >= 2 * engine.backend.timeout

    back: dict[str, float] = {}
    records = sit_through_an_outage(
        own_zookeeper,
        lambda: ZookeeperBackend({"hosts": own_zookeeper.hosts}, timeout=2),
        EngineConfig(lease_duration=6, renew_interval=2, metadata="noise"),
        caplog,
        recovered,
    )
    told_once_each(records, WARNINGS)
    assert [r for r in records if r.name == KAZOO_LOGGER.name], "kazoo's retries are still logged, at DEBUG"


def test_a_session_that_cannot_connect_says_how_long_it_waited_rounded():
    """The outage's last line quoted "could not connect to ZooKeeper at ... within 1.99944 s"."""
    backend = ZookeeperBackend({"hosts": "127.0.0.1:1"}, timeout=2)  # what is left of the call's 2 s
    try:
        with pytest.raises(
            BackendTimeout, match=r"could not connect to ZooKeeper at 127\.0\.0\.1:1 within 2\.0 s$"
        ):
            backend.open_session(6, "noise")
    finally:
        backend.close()
