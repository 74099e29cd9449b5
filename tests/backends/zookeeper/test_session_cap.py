"""A server that caps the session timeout: renewals follow the session ZooKeeper granted.

ZooKeeper clamps the timeout a client asks for to ``maxSessionTimeout``. Here it is 4 s (a
tick of 200 ms) while ``LEASE_DURATION`` asks for 10 s and ``RENEW_INTERVAL`` is 4 s: renewing
every 4 s would let the session pass its local deadline (3.96 s) after every grant, and every
term with it, a loss loop that nothing reported.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from django_simba.engine import EndReason, Engine, EngineConfig, ThreadRuntime
from django_simba.testing.waiting import wait_until
from tests.servers.zookeeper import ZookeeperNode, serving, zookeeper_standalone

from .conftest import BackendFactory

pytestmark = pytest.mark.zookeeper

CAP = 4.0
LEASE, RENEW = 10.0, 4.0


@pytest.fixture(scope="module")
def capped_server() -> Iterator[ZookeeperNode]:
    config = {"tickTime": "200", "minSessionTimeout": "400", "maxSessionTimeout": str(int(CAP * 1000))}
    with serving(lambda: zookeeper_standalone(extra_config=config), "a ZooKeeper capping sessions") as server:
        yield server


def test_terms_outlive_several_capped_grants_and_the_cap_is_logged_once(
    capped_server: ZookeeperNode, make_backend: BackendFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="django_simba.engine")
    backend = make_backend(capped_server.hosts)
    engine = Engine(backend, EngineConfig(lease_duration=LEASE, renew_interval=RENEW), ThreadRuntime())
    lost: list[EndReason] = []
    try:
        term = engine.lock("capped", on_lost=lambda term, reason: lost.append(reason)).acquire(5)
        session = term.session_id
        assert backend._session(session).timeout == CAP  # what the server granted
        held_from = engine.now()
        # three grants' worth: without the fix the term lapses at 3.96 s
        wait_until(lambda: engine.now() - held_from > 3 * CAP or not term.is_valid(), 3 * CAP + 5)
        assert term.is_valid() and not lost, f"the term lapsed ({term.ended}, {lost})"
        assert engine.session_id == session
        info = backend.owner("capped")
        assert info is not None and info.session_id == session and info.token == term.token
    finally:
        engine.close()
    logged = [r.getMessage() for r in caplog.records if "LEASE_DURATION asks for" in r.getMessage()]
    assert len(logged) == 1, logged
    assert "zookeeper backend granted a session of 4 s where LEASE_DURATION asks for 10 s" in logged[0]
