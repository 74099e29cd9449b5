"""Real faults on servers of the tests' own: restart, pause, CONFIG disabled, auth, TLS.

Eviction settings are in ``test_eviction.py``, ``wait_replicas`` in ``test_replicas.py``.
"""

from __future__ import annotations

import time
from typing import TypeVar

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.spi import (
    BackendTimeout,
    BackendUnavailable,
    ConfigurationError,
    NotificationKind,
    SessionExpired,
)
from django_simba.testing import wait_until
from django_simba.testing.redis_fixtures import assume_nothing_lost
from tests.backends.notifications import Recorder
from tests.servers.redis_cluster import RedisProcess, redis_server

from .conftest import once_reachable

pytestmark = pytest.mark.redis

T = TypeVar("T")


def test_restart_without_persistence_ends_sessions_and_resyncs(own_redis: RedisProcess) -> None:
    """The sessions are gone with the data; pub/sub reconnects and says so (tokens: ``test_data_loss``)."""
    backend = RedisBackend({"url": own_redis.url}, timeout=2)
    recorder = Recorder()
    backend.subscribe(recorder)
    backend.watch_lease("job")
    wait_until(lambda: backend.notifying, 10, message="pub/sub connection")
    old = backend.open_session(30, "before").session_id

    own_redis.restart()

    def old_session_is_gone() -> None:
        with pytest.raises(SessionExpired):
            backend.keep_alive(old, 30)

    once_reachable(old_session_is_gone)
    new = once_reachable(lambda: backend.open_session(30, "after")).session_id
    assert new != old
    wait_until(lambda: recorder.saw(NotificationKind.RESYNC), 10, message="RESYNC after the restart")
    assert backend.notifying
    backend.close()


def test_the_calls_after_a_restart_find_the_server_at_once(own_redis: RedisProcess) -> None:
    """A connection the restarted server closed while it sat idle is started afresh, not used to fail."""
    backend = RedisBackend({"url": own_redis.url}, timeout=2)
    sid = backend.open_session(30, "before").session_id
    assert backend.acquire(sid, "warm") is not None  # the calls' connection is idle now
    own_redis.restart()  # it answers again once this returns
    sid = backend.open_session(30, "after").session_id  # no BackendUnavailable first
    assert backend.acquire(sid, "warm") is None  # answered: held back for a lease after the loss
    backend.close()


def test_paused_server_times_out_then_recovers(own_redis: RedisProcess) -> None:
    backend = RedisBackend({"url": own_redis.url}, timeout=0.5)
    backend.subscribe(lambda event: None)
    sid = backend.open_session(30, "paused").session_id
    wait_until(lambda: backend.notifying, 10, message="pub/sub connection")
    own_redis.pause()
    try:
        for call in (lambda: backend.acquire(sid, "x"), lambda: backend.keep_alive(sid, 30)):
            started = time.monotonic()
            with pytest.raises(BackendTimeout):
                call()
            assert time.monotonic() - started < 1.5
        wait_until(lambda: not backend.notifying, 5, message="pub/sub noticed the pause")
    finally:
        own_redis.resume()
    assert once_reachable(lambda: backend.keep_alive(sid, 30)).remaining == pytest.approx(30, abs=0.1)
    wait_until(lambda: backend.notifying, 10, message="pub/sub back")
    backend.close()


def test_disabled_config_needs_the_check_turned_off() -> None:
    with redis_server("--rename-command", "CONFIG", '""') as server:
        checked = RedisBackend({"url": server.url}, timeout=2)
        with pytest.raises(ConfigurationError, match="check_eviction"):
            checked.open_session(5)
        unchecked = RedisBackend({"url": server.url, "check_eviction": False}, timeout=2)
        sid = unchecked.open_session(5).session_id
        assert unchecked.acquire(sid, "works") is not None
        unchecked.close()


def test_password_is_passed_through() -> None:
    with redis_server("--requirepass", "s3cret", marked=False) as server:
        anonymous = RedisBackend({"url": server.url, "check_eviction": False}, timeout=2)
        with pytest.raises(BackendUnavailable):
            anonymous.open_session(5)
        assume_nothing_lost({"url": server.url, "password": "s3cret"})
        backend = RedisBackend({"url": server.url, "password": "s3cret"}, timeout=2)
        backend.subscribe(lambda event: None)
        sid = backend.open_session(5).session_id
        assert backend.acquire(sid, "secret") is not None
        wait_until(lambda: backend.notifying, 10, message="pub/sub with the password")
        backend.close()


def test_tls_settings_are_passed_through() -> None:
    with redis_server(tls=True) as server:
        assert server.tls is not None
        untrusting = RedisBackend({"url": server.url}, timeout=2)
        with pytest.raises(BackendUnavailable):
            untrusting.open_session(5)  # the test CA is not trusted by default
        backend = RedisBackend({"url": server.url, "ssl_ca_certs": str(server.tls.ca)}, timeout=2)
        backend.subscribe(lambda event: None)
        sid = backend.open_session(5).session_id
        assert backend.acquire(sid, "over-tls") is not None
        wait_until(lambda: backend.notifying, 10, message="pub/sub over TLS")
        backend.close()
