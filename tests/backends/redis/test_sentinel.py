"""Redis under Sentinel: the backend's own ``sentinels``/``service`` options, and a django-redis
Sentinel cache borrowed by alias; both follow a failover (the primary SIGKILLed, its replica
promoted) without a restart, the pub/sub connection too.

The servers are the tests' own (``tests/servers/redis_sentinel.py``): a primary, a replica and
three Sentinels on loopback ports.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from redis.connection import SSLConnection
from redis.sentinel import SentinelManagedConnection

from django_simba.backends.redis import RedisBackend
from django_simba.backends.redis.scripting import StandaloneScripting
from django_simba.checks import check_settings
from django_simba.spi import (
    BackendUnavailable,
    ConfigurationError,
    Grant,
    Notification,
    NotificationKind,
    Renewal,
    SessionExpired,
)
from django_simba.testing import wait_until
from tests.servers.redis_cluster import HOST, REDIS_SERVER
from tests.servers.redis_sentinel import SentinelSet, redis_sentinel

from .test_faults import once_reachable

LEASE = 3.0  # a failover holds grants back for one lease: keep it short

pytestmark = pytest.mark.redis

SENTINELS = [("127.0.0.1", 26379), "127.0.0.2:26379"]
FACTORY = "django_redis.pool.SentinelConnectionFactory"


# -- options, without I/O --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"sentinels": SENTINELS}, "'sentinels' needs 'service'"),
        ({"service": "primary", "url": "redis://x"}, "'service' go with 'sentinels'"),
        ({"sentinels": SENTINELS, "service": "p", "url": "redis://x"}, "not url and sentinels"),
        ({"sentinels": SENTINELS, "service": "p", "cache": "redis"}, "not cache and sentinels"),
        ({"sentinels": SENTINELS, "service": "p", "cluster": True}, "not a Redis Cluster"),
        ({"sentinels": "127.0.0.1:26379", "service": "p"}, "non-empty list"),
        ({"sentinels": [], "service": "p"}, "non-empty list"),
        ({"sentinels": [("127.0.0.1",)], "service": "p"}, "is not 'host:port' nor a (host, port) pair"),
        ({"sentinels": [("127.0.0.1", "26379")], "service": "p"}, "is not 'host:port'"),
        ({"sentinels": [("127.0.0.1", 0)], "service": "p"}, "no valid port"),
        ({"sentinels": SENTINELS, "service": ""}, "'service' must be a non-empty string"),
        ({"sentinels": SENTINELS, "service": "p", "db": -1}, "'db' must be an int >= 0"),
        ({"sentinels": SENTINELS, "service": "p", "min_other_sentinels": True}, "'min_other_sentinels'"),
        ({"sentinels": SENTINELS, "service": "p", "sentinel_options": "pw"}, "must be a dict, not str"),
        ({"sentinels": SENTINELS, "service": "p", "sentinel_options": {"pasword": "x"}}, "pasword"),
        ({"url": "redis://x", "db": 2}, "'db' go with 'sentinels'"),
    ],
)
def test_bad_sentinel_options_are_refused_without_io(options: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        RedisBackend(options, timeout=1)
    assert complaint in str(caught.value)


def test_bad_sentinel_options_are_a_system_check_error() -> None:
    simba = {"BACKEND": "redis", "OPTIONS": {"sentinels": SENTINELS}, "TIMEOUT": 1}
    with override_settings(SIMBA=simba):
        messages = check_settings()
    assert [m.id for m in messages] == ["django_simba.E013"]
    assert "'sentinels' needs 'service'" in messages[0].msg and messages[0].hint


def test_sentinel_settings_reach_the_clients_with_the_backends_timeouts() -> None:
    """Credentials and TLS go to the primary and, through ``sentinel_options``, to the Sentinels."""
    options = {
        "sentinels": SENTINELS,
        "service": "orders",
        "db": 3,
        "password": "primary-secret",
        "ssl": True,
        "ssl_ca_certs": "/etc/ca.pem",
        "sentinel_options": {"password": "sentinel-secret", "ssl": True, "ssl_ca_certs": "/etc/ca.pem"},
        "min_other_sentinels": 1,
    }
    backend = RedisBackend(options, timeout=2)
    from django_simba.backends.redis.connection import standalone_client

    client = standalone_client(backend.settings, 2)  # builds, connects nothing
    try:
        pool = client.connection_pool
        assert pool.service_name == "orders" and pool.is_master
        assert issubclass(pool.connection_class, SentinelManagedConnection)
        assert issubclass(pool.connection_class, SSLConnection)
        primary = pool.connection_kwargs
        assert (primary["db"], primary["password"]) == (3, "primary-secret")
        assert primary["ssl_ca_certs"] == "/etc/ca.pem"
        assert primary["socket_timeout"] == primary["socket_connect_timeout"] == 2
        assert primary["retry"].get_retries() == 0
        manager = pool.sentinel_manager
        assert manager.min_other_sentinels == 1
        kwargs_of = [sentinel.connection_pool.connection_kwargs for sentinel in manager.sentinels]
        addresses = [(kwargs["host"], kwargs["port"]) for kwargs in kwargs_of]
        assert addresses == [("127.0.0.1", 26379), ("127.0.0.2", 26379)]
        for sentinel in manager.sentinels:
            kwargs = sentinel.connection_pool.connection_kwargs
            assert issubclass(sentinel.connection_pool.connection_class, SSLConnection)
            assert kwargs["password"] == "sentinel-secret" and kwargs["ssl_ca_certs"] == "/etc/ca.pem"
            assert kwargs["socket_timeout"] == 1.0  # two Sentinels asked in turn: one timeout for both
            assert kwargs["retry"].get_retries() == 0
    finally:
        client.close()
    backend.close()


# -- against real Sentinels --------------------------------------------------------------------------


@pytest.fixture
def sentinel_set() -> Iterator[SentinelSet]:
    import shutil

    from tests.conftest import server_missing

    if not shutil.which(REDIS_SERVER):
        server_missing(f"{REDIS_SERVER} (to start Redis servers and Sentinels of the tests' own)")
    with redis_sentinel() as started:
        yield started


def own_options(servers: SentinelSet) -> dict[str, Any]:
    return {"sentinels": [list(address) for address in servers.addresses], "service": servers.service}


def sentinel_cache(servers: SentinelSet, **extra: Any) -> dict[str, Any]:
    """A django-redis cache on the Sentinels, as django-redis's documentation configures one."""
    return {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": f"redis://{servers.service}/0",
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.SentinelClient",
            "SENTINELS": servers.addresses,
            **extra,
        },
    }


def test_the_backend_finds_the_primary_through_the_sentinels(sentinel_set: SentinelSet) -> None:
    backend = RedisBackend(own_options(sentinel_set), timeout=2)
    try:
        sid = backend.open_session(30, "via sentinel").session_id
        grant = backend.acquire(sid, "sentinel.found")
        assert grant is not None and grant.token > 0
        with sentinel_set.server_client(sentinel_set.primary) as primary:
            assert primary.hget("simba:lease:{sentinel.found}", "session") == sid
        backend.close_session(sid)
    finally:
        backend.close()


@pytest.mark.parametrize("how", ["per-cache factory", "DJANGO_REDIS_CONNECTION_FACTORY"])
def test_a_django_redis_sentinel_cache_is_borrowed_by_alias(sentinel_set: SentinelSet, how: str) -> None:
    if how == "per-cache factory":
        caches, extra = {"sentinel": sentinel_cache(sentinel_set, CONNECTION_FACTORY=FACTORY)}, {}
    else:
        caches = {"sentinel": sentinel_cache(sentinel_set)}
        extra = {"DJANGO_REDIS_CONNECTION_FACTORY": FACTORY}
    with override_settings(CACHES=caches, **extra):
        from django.core.cache import caches as django_caches

        backend = RedisBackend({"cache": "sentinel"}, timeout=1.5)
        try:
            sid = backend.open_session(30, "via a sentinel cache").session_id
            grant = backend.acquire(sid, "sentinel.cache")
            assert grant is not None
            scripting = backend.store.scripting
            assert isinstance(scripting, StandaloneScripting)
            ours = scripting.client.connection_pool
            assert issubclass(ours.connection_class, SentinelManagedConnection)
            assert ours.service_name == sentinel_set.service
            assert ours.connection_kwargs["socket_timeout"] == 1.5  # our timeout, not the cache's
            # the cache's own client sees what the backend wrote
            theirs = django_caches["sentinel"].client.get_client()  # type: ignore[attr-defined]
            assert int(theirs.hget("simba:lease:{sentinel.cache}", "token")) == grant.token
            backend.close_session(sid)
        finally:
            backend.close()


def test_a_sentinel_cache_of_replicas_is_refused(sentinel_set: SentinelSet) -> None:
    from django_redis import get_redis_connection

    from django_simba.backends.redis.connection import _client_of_sentinel_cache

    caches = {"sentinel": sentinel_cache(sentinel_set, CONNECTION_FACTORY=FACTORY)}
    with override_settings(CACHES=caches):
        replicas = get_redis_connection("sentinel", write=False).connection_pool
        with pytest.raises(ConfigurationError, match="a pool of replicas"):
            _client_of_sentinel_cache("sentinel", replicas, {"socket_timeout": 1})


def test_credentials_reach_the_sentinels_and_the_primary() -> None:
    with redis_sentinel(sentinel_password="s-secret", primary_password="p-secret") as servers:
        options = {**own_options(servers), "password": "p-secret"}
        refused = RedisBackend(options, timeout=1)
        try:
            with pytest.raises(BackendUnavailable, match="No master found"):
                refused.open_session(30)
        finally:
            refused.close()
        backend = RedisBackend({**options, "sentinel_options": {"password": "s-secret"}}, timeout=2)
        try:
            sid = backend.open_session(30).session_id
            assert backend.acquire(sid, "sentinel.auth") is not None
        finally:
            backend.close()


@pytest.mark.parametrize("how", ["own options", "cache alias"])
def test_a_failover_is_followed_without_a_restart(sentinel_set: SentinelSet, how: str) -> None:
    """SIGKILL the primary: once the replica is promoted, calls and notifications go to it."""
    caches = {"sentinel": sentinel_cache(sentinel_set, CONNECTION_FACTORY=FACTORY)}
    options = own_options(sentinel_set) if how == "own options" else {"cache": "sentinel"}
    with override_settings(CACHES=caches):
        backend = RedisBackend(options, timeout=1)
        heard: list[Notification] = []
        released = threading.Event()

        def listen(event: Notification) -> None:
            heard.append(event)
            if event.kind is NotificationKind.RELEASED and event.name == "failover.watched":
                released.set()

        try:
            sid = backend.open_session(LEASE, "before the failover").session_id
            grant = backend.acquire(sid, "failover.held")
            assert grant is not None
            backend.subscribe(listen)
            backend.watch_lease("failover.watched")
            wait_until(lambda: backend.notifying, 10, message="pub/sub live")
            first_connections = backend.subscriber.connections
            with sentinel_set.server_client(sentinel_set.primary) as primary:
                # the replica has everything so far: what the failover keeps is known
                wait_until(lambda: primary.wait(1, 100) == 1, 10, message="the replica acknowledging")

            old = sentinel_set.kill_primary()
            new, _ = sentinel_set.wait_for_new_primary(old)

            def renewal() -> Renewal | SessionExpired | None:
                try:
                    return backend.keep_alive(sid, LEASE)
                except SessionExpired as expired:  # the new primary's answer too (a slow failover)
                    return expired
                except BackendUnavailable:
                    return None

            renewed = wait_until(renewal, 20, message="a keep-alive reaching the new primary")
            # The promoted replica cannot know what its primary granted after the last write it
            # saw: a term from before the failover is over (docs/redis.rst, "A Redis that forgets"),
            # and so is the session itself if the failover outlasted its lease (a loaded machine).
            assert isinstance(renewed, SessionExpired) or "failover.held" not in renewed.owned
            # (a client id is no proof: the new primary counts its clients from 1 too, and may give
            # the new connection the id the old one had)
            wait_until(lambda: backend.notifying and backend.subscriber.connections > first_connections,
                       20, message="the pub/sub connection on the new primary")  # fmt: skip
            # The keep-alive has a connection of its own: the callers' pooled one dies once more.
            other = once_reachable(lambda: backend.open_session(LEASE, "after the failover")).session_id

            # new terms wait out the hold-back (one lease), then go on above every earlier token
            def kept_alive_acquire() -> Grant | None:
                # the test is the session's engine: it keeps the session alive while it asks (the
                # hold-back may outlast the lease of a session opened just after the failover)
                backend.keep_alive(other, LEASE)
                return backend.acquire(other, "failover.held")

            again = wait_until(kept_alive_acquire, 3 * LEASE, message="a grant after the hold-back")
            assert again.token > grant.token
            assert backend.acquire(other, "failover.watched") is not None
            backend.release(other, "failover.watched")
            assert released.wait(10), f"no release heard after the failover: {heard}"
            with sentinel_set.server_client(new) as promoted:
                assert promoted.hget("simba:lease:{failover.held}", "session") == other
        finally:
            backend.close()


def test_no_primary_is_a_clear_backend_unavailable(sentinel_set: SentinelSet) -> None:
    backend = RedisBackend({**own_options(sentinel_set), "service": "no-such-service"}, timeout=1)
    try:
        with pytest.raises(BackendUnavailable, match="No master found for 'no-such-service'"):
            backend.open_session(30)
    finally:
        backend.close()


def test_every_sentinel_down_is_a_clear_backend_unavailable() -> None:
    closed = [(HOST, 1), (HOST, 1), (HOST, 1)]  # nothing listens on port 1: refused at once
    backend = RedisBackend({"sentinels": closed, "service": "p"}, timeout=1)
    try:
        with pytest.raises(BackendUnavailable, match="No master found for 'p'"):
            backend.open_session(30)
    finally:
        backend.close()
