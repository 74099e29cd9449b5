"""What an idle name costs: its lease hash expires once its term is over, and its tokens never go back.

A held hash never expires (an eviction policy could drop it under its holder). Every way a term
ends gives the hash ``IDLE_LEASE_MS``: a release, a close, a force-release, a keep-alive that
finds its session gone, and for a holder that crashed, the purge (the session's index that would
name its leases expires with the session). A new term before then is one above the last token;
one after it takes the server clock's microseconds, above every earlier token.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from django_simba.backends.redis import RedisBackend
from django_simba.backends.redis.keys import IDLE_LEASE_MS, MARKER_KEY, lease_key
from django_simba.testing import wait_until
from tests.servers.redis_cluster import RedisProcess

pytestmark = pytest.mark.redis


@pytest.fixture
def backend(own_redis: RedisProcess) -> Iterator[RedisBackend]:
    made = RedisBackend({"url": own_redis.url}, timeout=2)
    yield made
    made.close()


@pytest.fixture
def raw(own_redis: RedisProcess) -> Iterator[redis.Redis]:
    with own_redis.client(decode_responses=True) as client:
        yield client


def idle(raw: redis.Redis, name: str) -> bool:
    """The hash of ``name`` expires within the idle time."""
    return 0 < int(raw.pttl(lease_key(name))) <= IDLE_LEASE_MS


def test_released_names_leave_no_key_without_expiry(backend: RedisBackend, raw: redis.Redis) -> None:
    sid = backend.open_session(30, "many").session_id
    for i in range(200):
        assert backend.acquire(sid, f"invoice:{i}") is not None
        backend.release(sid, f"invoice:{i}")
    backend.keep_alive(sid, 30)
    backend.close_session(sid)
    forever = [key for key in raw.scan_iter(count=1000) if raw.pttl(key) == -1]
    assert forever == [MARKER_KEY]  # one per database, whatever the number of names
    assert all(idle(raw, f"invoice:{i}") for i in range(200))


def test_a_held_hash_never_expires_and_a_new_term_before_the_idle_time_is_one_above(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    sid = backend.open_session(30, "held").session_id
    first = backend.acquire(sid, "held")
    assert first is not None and raw.pttl(lease_key("held")) == -1
    backend.keep_alive(sid, 30)
    assert raw.pttl(lease_key("held")) == -1
    backend.release(sid, "held")
    assert idle(raw, "held")
    again = backend.acquire(sid, "held")
    assert again is not None and again.token == first.token + 1
    assert raw.pttl(lease_key("held")) == -1  # held again: never expires


def test_a_name_acquired_after_its_hash_expired_gets_a_higher_token(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    sid = backend.open_session(30, "later").session_id
    tokens = []
    for _ in range(3):
        grant = backend.acquire(sid, "later")
        assert grant is not None
        tokens.append(grant.token)
        backend.release(sid, "later")
        raw.pexpire(lease_key("later"), 1)  # the idle time, run out early: the server expires the hash
        wait_until(lambda: not raw.exists(lease_key("later")), 5, message="the hash expired")
    assert tokens == sorted(set(tokens)) and tokens[-1] - tokens[0] > 2  # from the clock, not +1


def test_every_way_a_term_ends_starts_the_idle_time(backend: RedisBackend, raw: redis.Redis) -> None:
    sid = backend.open_session(30, "ends").session_id
    for name in ("closed", "forced"):
        assert backend.acquire(sid, name) is not None
    assert backend.force_release("forced")
    assert idle(raw, "forced")
    backend.close_session(sid)
    assert idle(raw, "closed")


def test_the_purge_gives_a_crashed_holders_hash_its_idle_time(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    crashed = backend.open_session(30, "crashed").session_id
    assert backend.acquire(crashed, "orphan") is not None
    backend.keep_alive(crashed, 0.05)  # its last renewal: the holder crashes now
    raw.hset(lease_key("old-version"), mapping={"session": "", "token": 7, "expires": 1})  # never expires
    wait_until(lambda: not raw.exists(f"simba:session:{{{crashed}}}"), 5, message="the session expired")
    assert raw.pttl(lease_key("orphan")) == -1  # nobody ended its term
    alive = backend.open_session(30, "alive").session_id
    assert backend.acquire(alive, "busy") is not None
    backend.purge_expired(1000)
    assert idle(raw, "orphan") and idle(raw, "old-version")
    assert raw.pttl(lease_key("busy")) == -1  # a live term keeps its hash


@pytest.mark.redis_cluster
def test_on_a_cluster_too_a_released_hash_expires_and_a_held_one_never(
    cluster_backend: RedisBackend, unique: str
) -> None:
    client = cluster_backend.store.scripting.client
    sid = cluster_backend.open_session(30, "cluster").session_id
    grant = cluster_backend.acquire(sid, unique)
    assert grant is not None and client.pttl(lease_key(unique)) == -1
    cluster_backend.keep_alive(sid, 30)
    assert client.pttl(lease_key(unique)) == -1
    cluster_backend.release(sid, unique)
    assert 0 < client.pttl(lease_key(unique)) <= IDLE_LEASE_MS
    client.delete(lease_key(unique))  # what the expiry does
    again = cluster_backend.acquire(sid, unique)
    assert again is not None and again.token > grant.token
    cluster_backend.close_session(sid)
    assert 0 < client.pttl(lease_key(unique)) <= IDLE_LEASE_MS
