"""Eviction: which server settings the backend refuses, and what an eviction it could not see costs.

An eviction of a session hash is simulated by deleting it (exactly what the eviction does), and done
for real once, on a server of the test's own with a memory limit and ``volatile-ttl``. Either way the
session's leases stay held until their own expiry: the holder may trust them until its local deadline.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from django_simba.backends.redis import EvictionPolicyWarning, RedisBackend
from django_simba.backends.redis.keys import lease_key, session_key, session_leases_key
from django_simba.spi import ConfigurationError, Grant, SessionExpired
from django_simba.testing import wait_until
from tests.servers.redis_cluster import RedisClusterProcesses, RedisProcess, redis_server

pytestmark = pytest.mark.redis

DRIFT = 0.01  # the engine's default: a holder trusts a term for sent + remaining * (1 - DRIFT)


@dataclass
class Topology:
    backend: RedisBackend
    raw: Any  # redis.Redis or redis.RedisCluster, decoding replies


@pytest.fixture(params=["standalone", pytest.param("cluster", marks=pytest.mark.redis_cluster)])
def topology(request: pytest.FixtureRequest) -> Iterator[Topology]:
    if request.param == "standalone":
        url = request.getfixturevalue("shared_url")
        backend = RedisBackend({"url": url}, timeout=5)
        raw: Any = redis.Redis.from_url(url, decode_responses=True)
    else:
        cluster: RedisClusterProcesses = request.getfixturevalue("cluster")
        backend = RedisBackend({"startup_nodes": cluster.startup_nodes, "cluster": True}, timeout=5)
        raw = redis.RedisCluster.from_url(cluster.url, decode_responses=True)
    yield Topology(backend, raw)
    backend.close()
    raw.close()


@dataclass
class Evicted:
    holder: str
    waiter: str
    grant: Grant
    trusted_until: float  # the holder's local deadline for its term


def evict_holder(topology: Topology, name: str, lease: float) -> Evicted:
    """A session holds ``name``, another waits; the holder's hash is evicted and its keep-alive says so."""
    backend = topology.backend
    holder = backend.open_session(lease, "holder").session_id
    waiter = backend.open_session(30, "waiter").session_id
    sent = time.monotonic()
    grant = backend.acquire(holder, name)
    assert grant is not None
    assert backend.acquire(waiter, name, wait=True) is None  # on a single node: first in line
    topology.raw.delete(session_key(holder))  # what an eviction of the session hash does
    with pytest.raises(SessionExpired):
        backend.keep_alive(holder, lease)  # the holder learns it; its leases must not be freed by it
    return Evicted(holder, waiter, grant, sent + grant.remaining * (1 - DRIFT))


def test_a_lease_of_an_evicted_session_is_not_taken_before_its_holder_stops_trusting_it(
    topology: Topology, unique: str
) -> None:
    backend = topology.backend
    evicted = evict_holder(topology, unique, 30)
    assert backend.acquire(evicted.waiter, unique, wait=True) is None
    info = backend.owner(unique)
    assert info is not None and (info.session_id, info.token) == (evicted.holder, evicted.grant.token)
    assert info.remaining > 20
    assert time.monotonic() < evicted.trusted_until  # all of the above while the holder could trust it


def test_a_lease_of_an_evicted_session_is_free_once_its_own_expiry_passed(
    topology: Topology, unique: str
) -> None:
    backend = topology.backend
    evicted = evict_holder(topology, unique, 1)
    taken = wait_until(lambda: backend.acquire(evicted.waiter, unique), 10, message="the lease's expiry")
    assert taken.token == evicted.grant.token + 1


def test_real_volatile_eviction_leaves_the_lease_to_its_holder() -> None:
    """A server evicting for real: ``volatile-ttl`` drops the key nearest its expiry, the session hash."""
    policy = ("--maxmemory", "8mb", "--maxmemory-policy", "volatile-ttl", "--maxmemory-samples", "64")
    with redis_server(*policy) as server, server.client(decode_responses=True) as raw:
        backend = RedisBackend({"url": server.url, "check_eviction": False}, timeout=5)
        holder = backend.open_session(30, "holder").session_id
        waiter = backend.open_session(600, "waiter").session_id
        grant = backend.acquire(holder, "job")
        assert grant is not None
        # evicted in the order of their expiry: the holder's session (30 s), fillers (300 s), the
        # waiter's session (600 s); the holder's lease index, made to outlive them all, stays
        raw.pexpire(session_leases_key(holder), 7_200_000)
        filler = "x" * 256 * 1024
        count = 0

        def session_evicted() -> bool:
            nonlocal count
            raw.set(f"filler:{count}", filler, px=300_000)
            count += 1
            return not raw.exists(session_key(holder))

        wait_until(session_evicted, 20, interval=0, message="eviction of the session hash")
        assert raw.exists(session_leases_key(holder), lease_key("job")) == 2
        assert int(raw.info("stats")["evicted_keys"]) >= 1

        with pytest.raises(SessionExpired):
            backend.keep_alive(holder, 30)
        assert backend.acquire(waiter, "job") is None
        info = backend.owner("job")
        assert info is not None and (info.session_id, info.token) == (holder, grant.token)
        backend.close()


# -- the start-up check ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "maxmemory", "reason"),
    [
        ("allkeys-lru", "0", "allkeys-lru"),  # a limit set later would arm it: refused all the same
        ("allkeys-random", "1gb", "allkeys-random"),
        ("volatile-lru", "1gb", r"volatile-lru and maxmemory"),
    ],
)
def test_evicting_settings_are_refused_unless_the_check_is_off(
    own_redis: RedisProcess, policy: str, maxmemory: str, reason: str
) -> None:
    with own_redis.client() as admin:
        admin.config_set("maxmemory", maxmemory)
        admin.config_set("maxmemory-policy", policy)
    backend = RedisBackend({"url": own_redis.url}, timeout=2)
    with pytest.raises(ConfigurationError, match=reason):
        backend.open_session(5)
    unchecked = RedisBackend({"url": own_redis.url, "check_eviction": False}, timeout=2)
    assert unchecked.open_session(5).remaining == 5
    unchecked.close()


def test_volatile_policy_without_a_memory_limit_is_only_warned(own_redis: RedisProcess) -> None:
    with own_redis.client() as admin:
        admin.config_set("maxmemory", "0")  # nothing is evicted: a later limit would arm the policy
        admin.config_set("maxmemory-policy", "volatile-ttl")
        backend = RedisBackend({"url": own_redis.url}, timeout=2)
        with pytest.warns(EvictionPolicyWarning, match="volatile-ttl"):
            assert backend.open_session(5).remaining == 5
        backend.close()


def test_noeviction_passes_silently_under_a_memory_limit(own_redis: RedisProcess) -> None:
    with own_redis.client() as admin:
        admin.config_set("maxmemory", "1gb")
        admin.config_set("maxmemory-policy", "noeviction")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            backend = RedisBackend({"url": own_redis.url}, timeout=2)
            backend.open_session(5)
            backend.close()


@pytest.mark.redis_cluster
def test_volatile_eviction_on_one_primary_refuses_the_cluster(cluster: RedisClusterProcesses) -> None:
    node = cluster.nodes[1]
    with node.client(decode_responses=True) as admin:
        admin.config_set("maxmemory", "1gb")
        admin.config_set("maxmemory-policy", "volatile-random")
        try:
            backend = RedisBackend({"startup_nodes": cluster.startup_nodes, "cluster": True}, timeout=5)
            with pytest.raises(ConfigurationError, match=f"{node.port}.*volatile-random"):
                backend.open_session(5)
            backend.close()
        finally:
            admin.config_set("maxmemory-policy", "noeviction")
            admin.config_set("maxmemory", "0")
