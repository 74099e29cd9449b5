"""Pub/sub: releases wake watchers at once, group changes are pushed, outages fall back to polling."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator

import pytest
import redis

from django_simba.backends.redis import RedisBackend
from django_simba.backends.redis.keys import lease_key
from django_simba.spi import Notification, NotificationKind
from django_simba.testing import wait_until
from tests.backends.notifications import Recorder
from tests.servers.redis_cluster import RedisClusterProcesses, RedisProcess


@pytest.fixture
def watcher(shared_url: str) -> Iterator[tuple[RedisBackend, Recorder]]:
    backend = RedisBackend({"url": shared_url}, timeout=5)
    recorder = Recorder()
    backend.subscribe(recorder)
    wait_until(lambda: backend.notifying, 10, message="pub/sub connection")
    yield backend, recorder
    backend.close()


@pytest.mark.redis
def test_release_wakes_a_watcher_within_100_ms(
    watcher: tuple[RedisBackend, Recorder], shared_backend: RedisBackend, unique: str
) -> None:
    backend, recorder = watcher
    backend.watch_lease(unique)
    holder = shared_backend.open_session(30, "holder").session_id
    latencies = []
    for _ in range(20):
        assert shared_backend.acquire(holder, unique) is not None
        started = time.monotonic()
        shared_backend.release(holder, unique)
        latencies.append(recorder.first(NotificationKind.RELEASED, unique, after=started) - started)
    shared_backend.close_session(holder)
    median, worst = statistics.median(latencies) * 1e3, max(latencies) * 1e3
    print(f"release -> listener: median {median:.2f} ms, max {worst:.2f} ms")
    assert max(latencies) < 0.1, latencies


@pytest.mark.redis
def test_unwatched_lease_is_not_notified(
    watcher: tuple[RedisBackend, Recorder], shared_backend: RedisBackend, unique: str
) -> None:
    backend, recorder = watcher
    backend.watch_lease(unique + ".watched")
    backend.watch_lease(unique)
    backend.unwatch_lease(unique)
    holder = shared_backend.open_session(30, "holder").session_id
    for name in (unique, unique + ".watched"):
        shared_backend.acquire(holder, name)
        shared_backend.release(holder, name)
    recorder.first(NotificationKind.RELEASED, unique + ".watched", after=0)
    assert not recorder.saw(NotificationKind.RELEASED, unique)
    shared_backend.close_session(holder)


@pytest.mark.redis
def test_group_changes_and_closes_are_notified(
    watcher: tuple[RedisBackend, Recorder], shared_backend: RedisBackend, unique: str
) -> None:
    backend, recorder = watcher
    backend.watch_group(unique)
    backend.watch_lease(unique)
    member = shared_backend.open_session(30, "member").session_id
    started = time.monotonic()
    shared_backend.join(member, unique)
    joined = recorder.first(NotificationKind.GROUP_CHANGED, unique, after=started)
    shared_backend.leave(member, unique)
    recorder.first(NotificationKind.GROUP_CHANGED, unique, after=joined)
    shared_backend.join(member, unique)
    assert shared_backend.acquire(member, unique) is not None
    closing = time.monotonic()
    shared_backend.close_session(member)  # frees the lease and the membership: both are pushed
    recorder.first(NotificationKind.RELEASED, unique, after=closing)
    recorder.first(NotificationKind.GROUP_CHANGED, unique, after=closing)


@pytest.mark.redis
def test_killed_subscriber_connection_falls_back_to_polling_and_resyncs(own_redis: RedisProcess) -> None:
    backend = RedisBackend({"url": own_redis.url}, timeout=5)
    recorder = Recorder()
    backend.subscribe(recorder)
    backend.watch_lease("victim")
    wait_until(lambda: backend.notifying, 10, message="pub/sub connection")
    killed_id = backend.subscriber.client_id
    with own_redis.client() as admin:
        pipe = admin.pipeline(transaction=False)
        pipe.execute_command("CLIENT", "KILL", "ID", killed_id)
        pipe.execute_command("CLIENT", "PAUSE", 1000, "ALL")  # holds the reconnect back for a second
        assert pipe.execute()[0] == 1
    wait_until(lambda: not backend.notifying, 1, interval=0.001, message="notifying False after the kill")
    assert not recorder.saw(NotificationKind.RESYNC)
    wait_until(lambda: backend.notifying, 10, message="pub/sub reconnect")
    wait_until(lambda: recorder.saw(NotificationKind.RESYNC), 5, message="RESYNC after the reconnect")
    assert backend.subscriber.client_id != killed_id
    # the watch survived the reconnect
    sid = backend.open_session(30, "x").session_id
    assert backend.acquire(sid, "victim") is not None
    started = time.monotonic()
    backend.release(sid, "victim")
    recorder.first(NotificationKind.RELEASED, "victim", after=started)
    backend.close()
    assert not backend.notifying


@pytest.mark.redis_cluster
def test_cluster_release_on_every_node_reaches_the_one_subscriber(
    cluster: RedisClusterProcesses, cluster_backend: RedisBackend, unique: str
) -> None:
    watcher = RedisBackend({"url": cluster.url, "cluster": True}, timeout=5)
    recorder = Recorder()
    watcher.subscribe(recorder)
    wait_until(lambda: watcher.notifying, 10, message="pub/sub connection")
    client = watcher.store.scripting.client
    by_node: dict[str, str] = {}
    for i in range(200):  # one lease name per primary
        name = f"{unique}.{i}"
        by_node.setdefault(client.get_node_from_key(lease_key(name)).name, name)
    assert len(by_node) == 3
    holder = cluster_backend.open_session(30, "holder").session_id
    for name in by_node.values():
        watcher.watch_lease(name)
        assert cluster_backend.acquire(holder, name) is not None
        started = time.monotonic()
        cluster_backend.release(holder, name)
        assert recorder.first(NotificationKind.RELEASED, name, after=started) - started < 0.1
    cluster_backend.close_session(holder)
    watcher.close()


@pytest.mark.redis
def test_subscribe_needs_no_server_and_listener_errors_are_contained(shared_url: str, unique: str) -> None:
    backend = RedisBackend({"url": "redis://127.0.0.1:1/0"}, timeout=0.5)  # nothing listens there
    backend.subscribe(lambda event: None)  # no I/O in the caller's thread
    backend.watch_lease(unique)  # returns at once while disconnected
    assert not backend.notifying
    backend.close()

    working = RedisBackend({"url": shared_url}, timeout=5)
    recorder = Recorder()

    def broken(event: Notification) -> None:
        raise RuntimeError("listener bug")

    working.subscribe(broken)
    working.subscribe(recorder)
    working.subscribe(recorder)  # once only
    working.watch_lease(unique)
    wait_until(lambda: working.notifying, 10, message="pub/sub connection")
    sid = working.open_session(30, "x").session_id
    working.acquire(sid, unique)
    working.release(sid, unique)
    recorder.first(NotificationKind.RELEASED, unique, after=0)
    working.close_session(sid)
    assert [e for e in recorder.events if e[1] is NotificationKind.RELEASED and e[2] == unique][1:] == []
    working.close()
    with redis.Redis.from_url(shared_url) as client:
        assert client.exists(lease_key(unique)) == 1
