"""A release whose delete failed is finished as a release: the node is never reported as held again.

The delete is sent through a proxy that throws requests away, and the connection is cut once
the request is out: the call fails with a connection loss and the server never applied it. The
ZooKeeper session survives (same session after reconnecting), and so does its node. Reported as
owned, that node would hand the released term's token to the next local holder.

A release asked again says whether the term was still held: not a loss when the first delete,
its reply lost, may have been the one that removed the node.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.serialization import Delete

from django_simba.backends.zookeeper import ZookeeperBackend, line
from django_simba.spi import BackendUnavailable, Grant, Released, Renewal
from django_simba.testing import wait_until
from tests.servers.zookeeper import ZookeeperNode

from .conftest import BackendFactory, held_node
from .proxy import ZookeeperProxy

pytestmark = pytest.mark.zookeeper


def test_a_lost_release_is_finished_by_the_next_keep_alive(
    proxy: ZookeeperProxy, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend, sid, name, grant = _released_on_the_way(proxy, make_backend)
    held = held_node(raw, name)
    assert held is not None and held[2].czxid == grant.token  # the delete never reached the server
    replies = [_renewed(backend, sid) for _ in range(3)]
    assert [renewal.owned for renewal in replies] == [{}, {}, {}]
    assert raw.exists(held[0]) is None  # the keep-alive deleted it: the name is free
    assert backend.owner(name) is None


def test_a_lost_release_asked_again_deletes_the_node(
    proxy: ZookeeperProxy, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend, sid, name, grant = _released_on_the_way(proxy, make_backend)
    again = _released_again(backend, sid, name, grant.token)
    assert held_node(raw, name) is None
    assert again.held is True  # this delete removed the node: the term was the session's until then
    assert backend.release(sid, name, grant.token).held is False  # freed now


def test_a_release_asked_again_after_an_applied_delete_lost_its_reply_reports_no_loss(
    proxy: ZookeeperProxy, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend = make_backend(proxy.hosts, timeout=5.0)
    sid = backend.open_session(10.0, "behind a proxy").session_id
    name = f"lost.{uuid.uuid4().hex[:12]}"
    grant = backend.acquire(sid, name)
    held = held_node(raw, name)
    assert grant is not None and held is not None
    error = _lost_on_the_way(
        proxy,
        backend,
        sid,
        lambda: backend.release(sid, name, grant.token),
        applied=lambda: raw.exists(held[0]) is None,
    )
    assert isinstance(error, BackendUnavailable), error
    again = _released_again(backend, sid, name, grant.token)
    # No node now: our first delete removed it, or an operator did before it; ZooKeeper cannot tell
    # which, and finding none must not read as a force-release.
    assert again.held is None
    assert backend.release(sid, name, grant.token).held is False  # asked once more: freed before


def test_a_release_that_finds_the_node_force_released_reports_it_gone(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    sid = backend.open_session(10.0, "holder").session_id
    name = f"forced.{uuid.uuid4().hex[:12]}"
    grant = backend.acquire(sid, name)
    assert grant is not None and backend.force_release(name)
    assert backend.release(sid, name, grant.token).held is False


def test_the_next_acquire_after_a_lost_release_gets_a_newer_term(
    proxy: ZookeeperProxy, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend, sid, name, grant = _released_on_the_way(proxy, make_backend)
    again = backend.acquire(sid, name)  # deletes the released term's node before joining the line
    assert again is not None and again.token > grant.token
    assert _renewed(backend, sid).owned == {name: again.token}
    held = held_node(raw, name)
    assert held is not None and held[2].czxid == again.token


def test_a_waiter_whose_leaving_was_lost_is_never_reported_holding(
    zookeeper_server: ZookeeperNode, proxy: ZookeeperProxy, make_backend: BackendFactory, raw: KazooClient
) -> None:
    holder_side = make_backend(zookeeper_server.hosts)
    holder = holder_side.open_session(10.0, "holder").session_id
    backend = make_backend(proxy.hosts, timeout=5.0)
    sid = backend.open_session(10.0, "behind a proxy").session_id
    name = f"lost.{uuid.uuid4().hex[:12]}"
    grant = holder_side.acquire(holder, name)
    assert grant is not None
    assert backend.acquire(sid, name, wait=True) is None
    error = _lost_on_the_way(proxy, backend, sid, lambda: backend.stop_waiting(sid, name))
    assert isinstance(error, BackendUnavailable), error
    holder_side.release(holder, name, grant.token)  # the waiter's node is first in line now
    assert [line.session_of(node) for node in raw.get_children(f"/simba/leases/{name}")] == [sid]
    assert _renewed(backend, sid).owned == {}
    assert held_node(raw, name) is None


def _released_on_the_way(
    proxy: ZookeeperProxy, make_backend: BackendFactory
) -> tuple[ZookeeperBackend, str, str, Grant]:
    """A session behind the proxy that took a new name and whose release of it was lost."""
    backend = make_backend(proxy.hosts, timeout=5.0)
    sid = backend.open_session(10.0, "behind a proxy").session_id
    name = f"lost.{uuid.uuid4().hex[:12]}"
    grant = backend.acquire(sid, name)
    assert grant is not None
    error = _lost_on_the_way(proxy, backend, sid, lambda: backend.release(sid, name, grant.token))
    assert isinstance(error, BackendUnavailable), error
    return backend, sid, name, grant


def _lost_on_the_way(
    proxy: ZookeeperProxy,
    backend: ZookeeperBackend,
    sid: str,
    action: Callable[[], Any],
    applied: Callable[[], bool] | None = None,
) -> BaseException | None:
    """Run ``action`` while the proxy drops requests; cut the connection once its delete is out.

    With ``applied``, the proxy drops the replies instead, and cuts once ``applied()`` is true.
    """
    client = backend._session(sid).client
    outcome: list[BaseException | None] = []
    if applied is None:
        proxy.swallow_requests()
    else:
        proxy.swallow_replies()
    caller = threading.Thread(target=lambda: outcome.append(_error_of(action)))
    caller.start()
    wait_until(
        lambda: any(isinstance(request, Delete) for request, _, _ in list(client._pending)),
        5,
        message="the delete written to the connection",
    )
    if applied is not None:
        wait_until(applied, 5, message="the delete applied by the server")
    proxy.cut()  # the delete fails with a connection loss (applied or not, as asked)
    proxy.forward()
    caller.join(10)
    assert len(outcome) == 1, outcome
    return outcome[0]


def _error_of(action: Callable[[], Any]) -> BaseException | None:
    try:
        action()
    except BaseException as error:
        return error
    return None


def _renewed(backend: ZookeeperBackend, sid: str) -> Renewal:
    """The next keep-alive that gets through (the client may still be reconnecting)."""

    def attempt() -> Renewal | None:
        try:
            return backend.keep_alive(sid, 10.0)
        except BackendUnavailable:
            return None

    renewal: Renewal = wait_until(attempt, 10, message="a keep-alive after reconnecting")
    return renewal


def _released_again(backend: ZookeeperBackend, sid: str, name: str, token: int) -> Released:
    """The reply of the release asked again, once one gets through."""
    released: Released = wait_until(
        lambda: _released(backend, sid, name, token), 10, message="the release asked again"
    )
    return released


def _released(backend: ZookeeperBackend, sid: str, name: str, token: int) -> Released | None:
    """The reply of a release that got through, or ``None`` (the client may still be reconnecting)."""
    try:
        return backend.release(sid, name, token)
    except BackendUnavailable:
        return None
