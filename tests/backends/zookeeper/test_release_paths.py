"""Which requests an acquire and a release send, and when a release must check the node first.

A grant sends ``create`` and ``exists`` (with a watch) together: one round trip, which also
answers who holds a refused name. While that watch has not fired, a release is a lone
``delete``; once anything may have touched the node (it was deleted, the connection dropped),
the release syncs and checks the node's owner and czxid before deleting it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from django_simba.backends.zookeeper import ZookeeperBackend
from django_simba.backends.zookeeper.session import ZkSession
from django_simba.spi import BackendUnavailable
from django_simba.testing import wait_until
from tests.servers.zookeeper import ZookeeperNode

from .conftest import BackendFactory
from .proxy import ZookeeperProxy

pytestmark = pytest.mark.zookeeper

RECORDED = ("create_async", "exists_async", "sync_async", "delete_async")


class Requests:
    """Records the requests one session's kazoo client sends, by kind (``create``, ``exists``...).

    ``after_a_reply`` counts the requests sent once the one before them was answered: each is
    one more round trip.
    """

    def __init__(self, session: ZkSession) -> None:
        self.sent: list[str] = []
        self.after_a_reply = 0
        self._last: Any = None
        client = session.client
        for method in RECORDED:
            original = getattr(client, method)
            setattr(client, method, self._recording(method.removesuffix("_async"), original))

    def _recording(self, kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def send(*args: Any, **kwargs: Any) -> Any:
            self.sent.append(kind)
            if self._last is not None and self._last.ready():
                self.after_a_reply += 1
            self._last = original(*args, **kwargs)
            return self._last

        return send

    def during(self, action: Callable[[], Any]) -> list[str]:
        self.sent.clear()
        self.after_a_reply = 0
        self._last = None
        action()
        return list(self.sent)


def _name() -> str:
    return f"paths.{uuid.uuid4().hex[:12]}"


def _session(backend: ZookeeperBackend, session_id: str) -> ZkSession:
    return backend._session(session_id)


def _holder(hosts: str, make_backend: BackendFactory) -> tuple[ZookeeperBackend, str, str]:
    """A backend on ``hosts``, a new lease name, and a session opened to hold it."""
    backend = make_backend(hosts)
    return backend, _name(), backend.open_session(10.0, "holder").session_id


def test_a_release_after_its_grant_is_one_delete(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend, name, sid = _holder(zookeeper_server.hosts, make_backend)
    requests = Requests(_session(backend, sid))
    grants: list[Any] = []
    assert requests.during(lambda: grants.append(backend.acquire(sid, name))) == ["create", "exists"]
    assert requests.after_a_reply == 0  # one round trip
    assert grants[0] is not None
    assert requests.during(lambda: backend.release(sid, name, grants[0].token)) == ["delete"]
    assert raw.exists(f"/simba/leases/{name}") is None


def test_a_refused_acquire_is_one_round_trip(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    name = _name()
    holder = backend.open_session(10.0, "holder").session_id
    other = backend.open_session(10.0, "other").session_id
    assert backend.acquire(holder, name) is not None
    requests = Requests(_session(backend, other))
    refused: list[Any] = []
    assert requests.during(lambda: refused.append(backend.acquire(other, name))) == ["create", "exists"]
    assert requests.after_a_reply == 0  # the look at the holder went with the create
    assert refused == [None]


def test_a_release_after_a_force_release_leaves_the_next_holders_node(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    name = _name()
    path = f"/simba/leases/{name}"
    first = backend.open_session(10.0, "first").session_id
    second = backend.open_session(10.0, "second").session_id
    grant = backend.acquire(first, name)
    assert grant is not None
    session = _session(backend, first)
    assert backend.force_release(name)
    # once the deletion's event has reached the first session's client, its watch is gone
    wait_until(lambda: not session._watch_live(path), 5, message="the watch firing on the deletion")
    taken = backend.acquire(second, name)
    assert taken is not None and taken.token > grant.token
    requests = Requests(session)
    assert requests.during(lambda: backend.release(first, name, grant.token)) == ["sync", "exists"]
    stat = raw.exists(path)
    assert stat is not None and stat.czxid == taken.token


def test_a_release_after_a_reconnection_checks_the_node_first(
    proxy: ZookeeperProxy, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend = make_backend(proxy.hosts, timeout=5.0)
    name = _name()
    sid = backend.open_session(10.0, "behind a proxy").session_id
    grant = backend.acquire(sid, name)
    assert grant is not None
    proxy.cut()  # kazoo reconnects under the same ZooKeeper session and forgets its watches
    wait_until(lambda: _kept_alive(backend, sid), 10, message="a keep-alive after reconnecting")
    requests = Requests(_session(backend, sid))
    assert requests.during(lambda: backend.release(sid, name, grant.token)) == ["sync", "exists", "delete"]
    assert requests.after_a_reply == 1  # the delete waited for the check
    assert raw.exists(f"/simba/leases/{name}") is None


def _kept_alive(backend: ZookeeperBackend, sid: str) -> bool:
    try:
        backend.keep_alive(sid, 10.0)
        return True
    except BackendUnavailable:
        return False


def test_a_grant_whose_look_failed_stands_and_its_release_checks_the_node(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend, name, sid = _holder(zookeeper_server.hosts, make_backend)
    session = _session(backend, sid)
    client = session.client
    original = client.exists_async

    def lost_look(path: str, watch: Any = None) -> Any:
        result = client.handler.async_result()
        result.set_exception(ConnectionLoss())  # as if the connection dropped before the reply
        return result

    client.exists_async = lost_look
    try:
        grant = backend.acquire(sid, name)
    finally:
        client.exists_async = original
    assert grant is not None
    stat = raw.exists(f"/simba/leases/{name}")
    assert stat is not None and stat.czxid == grant.token
    requests = Requests(session)
    assert requests.during(lambda: backend.release(sid, name, grant.token)) == ["sync", "exists", "delete"]
    assert raw.exists(f"/simba/leases/{name}") is None
