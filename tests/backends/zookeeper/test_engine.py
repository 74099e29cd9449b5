"""The real engine (threads, keep-alives, elections, locks) over the ZooKeeper backend."""

from __future__ import annotations

import functools
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from django_simba.backends.zookeeper import ZookeeperBackend
from django_simba.engine import Election, Engine, EngineConfig, ThreadRuntime
from django_simba.testing import wait_until
from tests.servers.zookeeper import ZookeeperEnsemble, ZookeeperNode

pytestmark = pytest.mark.zookeeper

EngineFactory = Callable[[str], Engine]


@pytest.fixture
def make_engine() -> Iterator[EngineFactory]:
    """Engines (one per simulated process) with a 3 s lease renewed every second."""
    made: list[Engine] = []

    def make(hosts: str) -> Engine:
        backend = ZookeeperBackend({"hosts": hosts}, timeout=1.0)
        engine = Engine(backend, EngineConfig(lease_duration=3.0, renew_interval=1.0), ThreadRuntime())
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.close()


def _leads(election: Election) -> bool:
    return election.is_leader


def _token(election: Election) -> int:
    term = election.term
    return term.token if term is not None else 0


def test_election_hands_over_through_the_watch(
    zookeeper_server: ZookeeperNode, make_engine: EngineFactory
) -> None:
    name = f"engine.{uuid.uuid4().hex[:12]}"
    engines = [make_engine(zookeeper_server.hosts) for _ in range(2)]
    leader = engines[0].election(name)
    wait_until(lambda: leader.is_leader, 10, message="first elected")
    handovers = []
    for turn in range(1, 5):
        candidate = engines[turn % 2].election(name)
        assert candidate.wait_decided(5) and not candidate.is_leader
        token = _token(leader)
        stepped_down = time.monotonic()
        leader.close()
        wait_until(functools.partial(_leads, candidate), 2, interval=0.001, message="hand-over")
        handovers.append(time.monotonic() - stepped_down)
        assert _token(candidate) > token
        leader = candidate
    # a polling candidate would wait 0 to 0.625 s (renew / 2 plus jitter); notified, it takes ms
    assert statistics.median(handovers) < 0.1, handovers


def test_election_recovers_after_the_ensemble_leader_crashes(
    zookeeper_cluster: ZookeeperEnsemble, make_engine: EngineFactory
) -> None:
    name = f"engine.{uuid.uuid4().hex[:12]}"
    candidates = [make_engine(zookeeper_cluster.hosts).election(name) for _ in range(2)]
    wait_until(lambda: any(c.is_leader for c in candidates), 10, message="a leader")
    samples: list[list[int]] = []  # the tokens of the candidates that believe they lead, every 5 ms
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            samples.append([_token(c) for c in candidates if c.is_leader])
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        zookeeper_cluster.leader().restart(crash=True)
        zookeeper_cluster.wait_quorum()
        leader = wait_until(
            lambda: next((c for c in candidates if c.is_leader), None), 15, message="a leader"
        )
        time.sleep(1.0)  # a few more renewals on the new ensemble leader
    finally:
        sampling.set()
        sampler.join()
    assert all(len(tokens) <= 1 for tokens in samples), "two candidates believed they led at once"
    led = [tokens[0] for tokens in samples if tokens]
    assert led == sorted(led), "a leader's token went back"
    assert leader is not None
    other = next(c for c in candidates if c is not leader)
    token = _token(leader)
    leader.close()
    wait_until(lambda: other.is_leader, 5, message="the other candidate elected")
    assert _token(other) > token


def test_engine_opens_a_new_session_after_the_server_expired_its_own(
    zookeeper_server: ZookeeperNode, make_engine: EngineFactory
) -> None:
    name = f"engine.{uuid.uuid4().hex[:12]}"
    engine = make_engine(zookeeper_server.hosts)
    election = engine.election(name)
    wait_until(lambda: election.is_leader, 10, message="elected")
    token, session_id = _token(election), engine.session_id
    backend = engine.backend
    assert isinstance(backend, ZookeeperBackend) and session_id is not None
    intruder = KazooClient(
        hosts=zookeeper_server.hosts, client_id=backend._session(session_id).client.client_id
    )
    intruder.start(10)
    intruder.stop()  # closes the engine's ZooKeeper session on the server
    intruder.close()
    wait_until(
        lambda: engine.session_id not in (None, session_id) and election.is_leader, 10, message="re-elected"
    )
    assert _token(election) > token
