"""A create applied by the server whose reply never reached the caller is reported by the next keep-alive.

Two faithful ways to lose a reply: pause the server (SIGSTOP) past the call's timeout and let it
resume, so the create is applied after the caller gave up; or let the request through a proxy
that throws the server's answers away and then drops the connection, so the create is applied
and the client sees a connection loss.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from kazoo.client import KazooClient

from django_simba.backends.zookeeper import ZookeeperBackend, line
from django_simba.spi import BackendTimeout, BackendUnavailable, Grant, NotificationKind, Renewal
from django_simba.testing import wait_until
from tests.servers.zookeeper import ZookeeperNode

from .conftest import BackendFactory, held_node
from .proxy import ZookeeperProxy

pytestmark = pytest.mark.zookeeper


def test_create_applied_after_the_call_timed_out_is_reported(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend = make_backend(zookeeper_server.hosts, timeout=0.5)
    name = f"lost.{uuid.uuid4().hex[:12]}"
    sid = backend.open_session(10.0, "paused").session_id
    raw.ensure_path(f"/simba/leases/{name}")  # so the lost create is the one that joins the line
    _acquire_while_paused(zookeeper_server, backend, sid, name)
    path, _, stat = wait_until(lambda: held_node(raw, name), 10, message="the create applied after the pause")
    assert stat.ephemeralOwner & 0xFFFF_FFFF_FFFF_FFFF == int(sid, 16)
    renewal = wait_until(lambda: _keep_alive(backend, sid), 10, message="a keep-alive after the pause")
    assert renewal is not None and renewal.owned == {name: stat.czxid}
    # the engine releases what it did not know it had: the name is free again
    backend.release(sid, name)
    assert raw.exists(path) is None
    assert backend.keep_alive(sid, 10.0).owned == {}


def test_a_lost_create_behind_another_holder_is_deleted(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend = make_backend(zookeeper_server.hosts, timeout=0.5)
    name = f"lost.{uuid.uuid4().hex[:12]}"
    holder = backend.open_session(10.0, "holder").session_id
    sid = backend.open_session(10.0, "paused").session_id
    assert backend.acquire(holder, name) is not None
    directory = f"/simba/leases/{name}"
    _acquire_while_paused(zookeeper_server, backend, sid, name)
    wait_until(
        lambda: len(raw.get_children(directory)) == 2, 10, message="the create applied after the pause"
    )
    renewal = wait_until(lambda: _keep_alive(backend, sid), 10, message="a keep-alive after the pause")
    assert renewal is not None and renewal.owned == {}
    # the keep-alive deleted the node nobody waits behind: the holder alone is left in line
    assert [line.session_of(node) for node in raw.get_children(directory)] == [holder]


def test_create_applied_but_connection_lost_is_reported(
    proxy: ZookeeperProxy, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend = make_backend(proxy.hosts, timeout=5.0)
    name = f"lost.{uuid.uuid4().hex[:12]}"
    sid = backend.open_session(10.0, "behind a proxy").session_id
    raw.ensure_path(f"/simba/leases/{name}")  # so the lost create is the one that joins the line
    outcome: list[Grant | BaseException | None] = []
    proxy.swallow_replies()
    caller = threading.Thread(target=lambda: outcome.append(_attempt(backend, sid, name)))
    caller.start()
    _, _, stat = wait_until(lambda: held_node(raw, name), 5, message="the create reaching the server")
    proxy.cut()  # the reply is lost with the connection
    proxy.forward()
    caller.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], BackendUnavailable), outcome
    # same ZooKeeper session after the reconnection: the lease is ours and reported
    renewal = wait_until(lambda: _keep_alive(backend, sid), 10, message="a keep-alive after reconnecting")
    assert renewal is not None and renewal.owned == {name: stat.czxid}
    info = backend.owner(name)
    assert info is not None and info.session_id == sid and info.token == stat.czxid
    again = backend.acquire(sid, name)
    assert again is not None and again.token == stat.czxid


def test_lost_connection_of_the_shared_client_announces_resync(
    proxy: ZookeeperProxy, make_backend: BackendFactory
) -> None:
    backend = make_backend(proxy.hosts, timeout=5.0)
    seen: list[NotificationKind] = []
    backend.subscribe(lambda event: seen.append(event.kind))
    wait_until(lambda: backend.notifying, 10, message="notifications live")
    proxy.cut()
    wait_until(lambda: NotificationKind.RESYNC in seen, 10, message="RESYNC after the reconnection")
    assert backend.notifying


def _acquire_while_paused(server: ZookeeperNode, backend: ZookeeperBackend, sid: str, name: str) -> None:
    """An acquire sent while the server is paused: it times out, and is applied once it resumes."""
    server.pause()
    try:
        with pytest.raises(BackendTimeout):
            backend.acquire(sid, name)
    finally:
        server.resume()


def _attempt(backend: ZookeeperBackend, sid: str, name: str) -> Grant | BaseException | None:
    try:
        return backend.acquire(sid, name)
    except BaseException as error:
        return error


def _keep_alive(backend: ZookeeperBackend, sid: str) -> Renewal | None:
    try:
        return backend.keep_alive(sid, 10.0)
    except BackendUnavailable:
        return None
