"""A name's line of sequential nodes: what an acquire and a release send, and who gets the name next.

An acquire sends ``create`` and ``get_children`` together: one round trip, which says whether the
new node is first in line. A release deletes the term's own node: one request. A waiter whose
node is next in line gets the name when the holder's node goes, without a request of its own,
and is told by a HANDED_OVER notification; waiters further back are not woken.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooClient

from django_simba.backends.zookeeper import ZookeeperBackend, line
from django_simba.backends.zookeeper.session import _WATCHED_AHEAD, ZkSession
from django_simba.spi import BackendUnavailable, Grant, Notification, NotificationKind
from django_simba.testing import wait_until
from tests.servers.zookeeper import ZookeeperNode

from .conftest import BackendFactory, held_node
from .proxy import ZookeeperProxy

pytestmark = pytest.mark.zookeeper

RECORDED = ("create_async", "exists_async", "get_children_async", "sync_async", "delete_async")
HANDED_OVER = NotificationKind.HANDED_OVER


class Requests:
    """Records the requests one session's kazoo client sends, by kind (``create``, ``delete``...).

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


class HandOvers:
    """The HANDED_OVER notifications a backend delivers, as ``(name, session id, token)``."""

    def __init__(self, backend: ZookeeperBackend) -> None:
        self.heard: list[tuple[str, str, int]] = []
        self._changed = threading.Condition()
        backend.subscribe(self)

    def __call__(self, event: Notification) -> None:
        if event.kind is HANDED_OVER:
            with self._changed:
                self.heard.append((event.name, event.session_id, event.token))
                self._changed.notify_all()

    def wait_for(self, name: str, session_id: str, timeout: float = 5.0) -> int:
        """The token handed to ``session_id``, once it was announced."""

        def token() -> int | None:
            return next((t for n, s, t in self.heard if n == name and s == session_id), None)

        with self._changed:
            if not self._changed.wait_for(lambda: token() is not None, timeout):
                raise AssertionError(
                    f"{name!r} was not handed to {session_id} within {timeout} s: {self.heard}"
                )
        found = token()
        assert found is not None
        return found

    def to(self, session_id: str) -> list[int]:
        with self._changed:
            return [t for _, s, t in self.heard if s == session_id]


def _name() -> str:
    return f"line.{uuid.uuid4().hex[:12]}"


def _session(backend: ZookeeperBackend, session_id: str) -> ZkSession:
    return backend._session(session_id)


def _queue(backend: ZookeeperBackend, count: int) -> tuple[str, list[str], Any]:
    """A new name, ``count`` sessions in its line, and the grant of the first (the others wait)."""
    name = _name()
    sessions = [backend.open_session(10.0, f"s{i}").session_id for i in range(count)]
    grant = backend.acquire(sessions[0], name)
    assert grant is not None
    for sid in sessions[1:]:
        assert backend.acquire(sid, name, wait=True) is None
    return name, sessions, grant


def _line(raw: KazooClient, name: str) -> list[str]:
    """The sessions in ``name``'s line, first (the holder) to last."""
    return [line.session_of(node) for node in line.in_order(raw.get_children(f"/simba/leases/{name}"))]


def test_the_line_is_ordered_by_sequence_and_ignores_foreign_nodes() -> None:
    children = ["b-0000000012", "a-0000000003", "forged", "c-12", "d-0000000007"]
    assert line.in_order(children) == ["a-0000000003", "d-0000000007", "b-0000000012"]
    assert line.head(children) == "a-0000000003"
    assert line.head(["forged"]) is None
    assert line.ahead_of("b-0000000012", children) == ["a-0000000003", "d-0000000007"]
    assert line.ahead_of("a-0000000003", children) == []
    assert line.ahead_of("e-0000000001", children) is None
    assert line.session_of("0123456789abcdef-0000000004") == "0123456789abcdef"


def test_an_acquire_is_one_round_trip_and_its_release_one_delete(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    name, sid = _name(), backend.open_session(10.0, "holder").session_id
    requests = Requests(_session(backend, sid))
    grants: list[Any] = []
    assert requests.during(lambda: grants.append(backend.acquire(sid, name))) == ["create", "get_children"]
    assert requests.after_a_reply == 0  # the name's new line was created in the same round trip
    held = held_node(raw, name)
    assert grants[0] is not None and held is not None and held[2].czxid == grants[0].token
    assert requests.during(lambda: backend.release(sid, name, grants[0].token)) == ["delete"]
    assert held_node(raw, name) is None


def test_a_refused_try_leaves_the_line_and_a_waiter_stays_in_it(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    name = _name()
    holder = backend.open_session(10.0, "holder").session_id
    other = backend.open_session(10.0, "other").session_id
    assert backend.acquire(holder, name) is not None
    requests = Requests(_session(backend, other))
    refused: list[Any] = []
    sent = requests.during(lambda: refused.append(backend.acquire(other, name)))
    assert refused == [None] and sent == ["create", "get_children", "exists", "delete"]  # a look once
    assert _line(raw, name) == [holder]
    sent = requests.during(lambda: refused.append(backend.acquire(other, name, wait=True)))
    assert refused[-1] is None and sent[:2] == ["create", "get_children"] and "delete" not in sent
    assert _line(raw, name) == [holder, other]
    # trying again while in line only looks at the line, and stays in it
    sent = requests.during(lambda: refused.append(backend.acquire(other, name, wait=True)))
    assert refused[-1] is None and sent == ["get_children"]  # its watches still stand: none set again
    assert _line(raw, name) == [holder, other]
    backend.stop_waiting(other, name)
    assert _line(raw, name) == [holder]


def test_a_try_refused_by_another_processs_holder_looks_at_its_node_once(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory
) -> None:
    """Before refusing, a try makes sure the node ahead is a session's, not one planted there
    (``foreign.py``): one look the first time this process meets that node, none after."""
    name = _name()
    holding = make_backend(zookeeper_server.hosts)  # another process
    assert holding.acquire(holding.open_session(10.0, "holder").session_id, name) is not None
    backend = make_backend(zookeeper_server.hosts)
    other = backend.open_session(10.0, "other").session_id
    requests = Requests(_session(backend, other))
    first = requests.during(lambda: backend.acquire(other, name))
    assert first == ["create", "get_children", "exists", "delete"]
    assert requests.during(lambda: backend.acquire(other, name)) == ["create", "get_children", "delete"]


def test_a_release_hands_the_name_to_the_next_in_line_only(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    hand_overs = HandOvers(backend)
    name, (first, second, third), grant = _queue(backend, 3)
    second_requests = Requests(_session(backend, second))
    sent = second_requests.during(lambda: backend.release(first, name, grant.token))
    assert sent == []  # the release came from another session: nothing asked by the second
    token = hand_overs.wait_for(name, second)
    assert token > grant.token
    assert second_requests.sent == []  # it was next to the holder: the deletion alone says it's ours
    assert backend.keep_alive(second, 10.0).owned == {name: token}
    info = backend.owner(name)
    assert info is not None and info.session_id == second and info.token == token
    assert hand_overs.to(third) == []
    backend.release(second, name, token)
    assert hand_overs.wait_for(name, third) > token
    assert _line(raw, name) == [third]


def test_a_waiter_that_left_is_passed_over_and_one_ahead_leaving_moves_the_line_up(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    hand_overs = HandOvers(backend)
    name, sessions, grant = _queue(backend, 4)
    backend.stop_waiting(sessions[1], name)  # the third now watches the holder's node
    backend.stop_waiting(sessions[2], name)  # ... and the fourth too
    assert _line(raw, name) == [sessions[0], sessions[3]]
    backend.release(sessions[0], name, grant.token)
    assert hand_overs.wait_for(name, sessions[3]) > grant.token
    assert hand_overs.to(sessions[1]) == [] and hand_overs.to(sessions[2]) == []


def test_the_holders_death_or_a_force_release_hands_the_name_over(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    hand_overs = HandOvers(backend)
    name, (holder, waiter, last), grant = _queue(backend, 3)
    backend.close_session(holder)  # its ephemeral node goes with the ZooKeeper session
    token = hand_overs.wait_for(name, waiter)
    assert token > grant.token
    assert backend.force_release(name) is True  # deletes the holder's own node, nothing else
    assert hand_overs.wait_for(name, last) > token
    assert _line(raw, name) == [last]
    assert backend.keep_alive(waiter, 10.0).owned == {}
    requests = Requests(_session(backend, waiter))
    assert requests.during(lambda: backend.release(waiter, name, token)) == []  # not held any more
    assert _line(raw, name) == [last]


def test_a_waiter_looks_at_its_line_again_after_a_reconnection(
    zookeeper_server: ZookeeperNode, proxy: ZookeeperProxy, make_backend: BackendFactory
) -> None:
    holder_side, waiter_side, name, (holder, waiter), grant = _waiting_behind_a_proxy(
        zookeeper_server, proxy, make_backend
    )
    hand_overs = HandOvers(waiter_side)
    proxy.swallow_replies()  # the deletion's event is lost with the connection
    holder_side.release(holder, name, grant.token)
    proxy.cut()
    proxy.forward()
    assert hand_overs.wait_for(name, waiter, timeout=10) > grant.token
    renewal = wait_until(
        lambda: _keep_alive(waiter_side, waiter), 10, message="a keep-alive after reconnecting"
    )
    assert set(renewal.owned) == {name}


def test_a_waiter_watches_again_after_a_reconnection(
    zookeeper_server: ZookeeperNode, proxy: ZookeeperProxy, make_backend: BackendFactory
) -> None:
    holder_side, waiter_side, name, (holder, waiter), grant = _waiting_behind_a_proxy(
        zookeeper_server, proxy, make_backend
    )
    hand_overs = HandOvers(waiter_side)
    proxy.cut()  # kazoo forgets the waiter's watches; the holder keeps the name
    wait_until(lambda: _keep_alive(waiter_side, waiter), 10, message="a keep-alive after reconnecting")
    assert waiter_side.acquire(waiter, name, wait=True) is None
    holder_side.release(holder, name, grant.token)
    assert hand_overs.wait_for(name, waiter) > grant.token


def _waiting_behind_a_proxy(
    zookeeper_server: ZookeeperNode, proxy: ZookeeperProxy, make_backend: BackendFactory
) -> tuple[ZookeeperBackend, ZookeeperBackend, str, tuple[str, str], Grant]:
    """A holder connected directly, and a session waiting in line behind a proxy."""
    holder_side = make_backend(zookeeper_server.hosts)
    waiter_side = make_backend(proxy.hosts, timeout=5.0)
    name = _name()
    holder = holder_side.open_session(10.0, "holder").session_id
    waiter = waiter_side.open_session(10.0, "behind a proxy").session_id
    grant = holder_side.acquire(holder, name)
    assert grant is not None
    assert waiter_side.acquire(waiter, name, wait=True) is None
    return holder_side, waiter_side, name, (holder, waiter), grant


def _keep_alive(backend: ZookeeperBackend, sid: str) -> Any:
    try:
        return backend.keep_alive(sid, 10.0)
    except BackendUnavailable:
        return None


def test_a_long_line_is_served_in_order(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient
) -> None:
    """Waiters far back watch only the node just ahead (``_WATCHED_AHEAD``), and still get their turn."""
    backend = make_backend(zookeeper_server.hosts)
    hand_overs = HandOvers(backend)
    name, sessions, grant = _queue(backend, 2 * _WATCHED_AHEAD + 2)
    backend.stop_waiting(sessions[-2], name)  # one far back leaves: the one behind it moves up
    served = [sid for sid in sessions if sid != sessions[-2]]
    assert _line(raw, name) == served
    token = grant.token
    for holder, successor in itertools.pairwise(served):
        backend.release(holder, name, token)
        handed = hand_overs.wait_for(name, successor)
        assert handed > token
        token = handed
    assert [sid for _, sid, _ in hand_overs.heard] == served[1:]  # each was told once, in line order
