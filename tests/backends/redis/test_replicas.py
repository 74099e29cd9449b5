"""``wait_replicas`` on a real primary with a real replica: nothing the engine trusts goes unreplicated.

A paused replica (SIGSTOP) acknowledges nothing, so every WAIT runs out: renewals, terms already held
and joins must then fail rather than be trusted, since a failover to that replica would undo them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.spi import BackendUnavailable, SessionExpired
from django_simba.testing import wait_until
from tests.servers.redis_cluster import RedisProcess, redis_server

pytestmark = pytest.mark.redis


@pytest.fixture
def replica(own_redis: RedisProcess) -> Iterator[RedisProcess]:
    """A replica of ``own_redis``, in sync; resumed and stopped by PID afterwards."""
    with own_redis.client() as admin:
        admin.config_set("repl-diskless-sync-delay", 0)  # the replica syncs at once
    with redis_server("--replicaof", "127.0.0.1", str(own_redis.port), marked=False) as started:
        with own_redis.client() as client:
            # online is not enough: a replica may acknowledge its first write only at its next second
            client.set("simba-test:synced", 1)
            wait_until(lambda: client.wait(1, 100) == 1, 15, message="replica acknowledging")
        yield started


@pytest.fixture
def replicated(own_redis: RedisProcess, replica: RedisProcess) -> Iterator[RedisBackend]:
    # WAIT waits half the timeout: 1.5 s, for a replica that a loaded machine schedules late
    backend = RedisBackend({"url": own_redis.url, "wait_replicas": 1}, timeout=3)
    yield backend
    backend.close()


def once_acknowledged(call: Callable[[], object]) -> None:
    """Retry ``call`` until the resumed replica caught up and acknowledges again."""

    def succeeded() -> bool:
        try:
            call()
        except BackendUnavailable:
            return False
        return True

    wait_until(succeeded, 15, message="acknowledged by the resumed replica")


def test_wait_replicas_counts_a_term_only_once_replicated(
    own_redis: RedisProcess, replica: RedisProcess
) -> None:
    one = RedisBackend({"url": own_redis.url, "wait_replicas": 1}, timeout=4)
    sid = one.open_session(30).session_id
    grant = one.acquire(sid, "replicated")
    assert grant is not None
    one.release(sid, "replicated")

    two = RedisBackend({"url": own_redis.url, "wait_replicas": 2}, timeout=1)
    other = two.open_session(30).session_id
    with pytest.raises(BackendUnavailable, match="only 1 of 2 replicas"):
        two.acquire(other, "replicated")
    assert two.owner("replicated") is None  # the unconfirmed term was given back
    again = one.acquire(sid, "replicated")
    assert again is not None and again.token == grant.token + 2  # the term given back had one
    one.close()
    two.close()


def test_a_renewal_counts_only_once_replicated(replicated: RedisBackend, replica: RedisProcess) -> None:
    sid = replicated.open_session(30).session_id
    grant = replicated.acquire(sid, "renewed")
    assert grant is not None
    assert replicated.keep_alive(sid, 30).owned == {"renewed": grant.token}
    dead = replicated.open_session(30).session_id
    replicated.close_session(dead)

    replica.pause()
    try:
        with pytest.raises(BackendUnavailable, match="renewal of session"):
            replicated.keep_alive(sid, 30)
        with pytest.raises(SessionExpired):  # a verdict that ends terms needs no acknowledgement
            replicated.keep_alive(dead, 30)
    finally:
        replica.resume()
    once_acknowledged(lambda: replicated.keep_alive(sid, 30))


def test_a_term_held_already_is_confirmed_only_once_replicated(
    replicated: RedisBackend, replica: RedisProcess
) -> None:
    sid = replicated.open_session(30).session_id
    assert replicated.acquire(sid, "held") is not None  # acknowledged
    replica.pause()
    try:
        with pytest.raises(BackendUnavailable, match="renewal"):
            replicated.keep_alive(sid, 30)  # applied on the primary, acknowledged by nobody
        with pytest.raises(BackendUnavailable, match="the term of 'held'"):
            replicated.acquire(sid, "held")  # would report the renewed, unconfirmed expiry
    finally:
        replica.resume()
    once_acknowledged(lambda: replicated.acquire(sid, "held"))


def test_a_join_counts_only_once_replicated(replicated: RedisBackend, replica: RedisProcess) -> None:
    sid = replicated.open_session(30).session_id
    replica.pause()
    try:
        with pytest.raises(BackendUnavailable, match="membership of 'workers'"):
            replicated.join(sid, "workers")
        assert replicated.members("workers") == []  # given back
    finally:
        replica.resume()
    once_acknowledged(lambda: replicated.join(sid, "workers"))
    assert [member.session_id for member in replicated.members("workers")] == [sid]
