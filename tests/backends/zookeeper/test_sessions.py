"""Sessions on ZooKeeper: layout, timeouts, the watchdog, server-side expiry, keep-alive cost, containers."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from django_simba.backends.zookeeper import ZookeeperBackend
from django_simba.backends.zookeeper import session as session_module
from django_simba.backends.zookeeper import watchdog as watchdog_module
from django_simba.spi import BackendUnavailable, SessionExpired
from django_simba.spi.clock import local_clock
from django_simba.testing import wait_until
from tests.servers.zookeeper import ZookeeperNode

from .conftest import BackendFactory, held_node

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def name() -> str:
    return f"zk.{uuid.uuid4().hex[:12]}"


def test_nodes_follow_the_documented_layout(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient, name: str
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    sid = backend.open_session(10.0, "layout").session_id
    assert len(sid) == 16 and int(sid, 16) > 0
    grant = backend.acquire(sid, name)
    assert grant is not None
    held = held_node(raw, name)
    assert held is not None
    path, data, stat = held
    assert path.startswith(f"/simba/leases/{name}/{sid}-")  # the first node of the name's line
    assert data == sid.encode()
    assert stat.ephemeralOwner & 0xFFFF_FFFF_FFFF_FFFF == int(sid, 16)  # the ZooKeeper session id
    assert grant.token == stat.czxid
    _, session_stat = raw.get(f"/simba/sessions/{sid}")
    assert session_stat.ephemeralOwner == stat.ephemeralOwner
    backend.join(sid, name)
    member, member_stat = raw.get(f"/simba/groups/{name}/{sid}")
    assert member == b"layout" and member_stat.ephemeralOwner == stat.ephemeralOwner


def test_observing_a_root_nobody_used_yet(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient, name: str
) -> None:
    root = f"/simba-fresh-{uuid.uuid4().hex[:12]}"
    backend = make_backend(zookeeper_server.hosts, root=root)
    assert backend.owner(name) is None
    assert backend.leases() == [] and backend.sessions() == [] and backend.groups() == {}
    assert backend.members(name) == []
    assert backend.force_release(name) is False
    opened = backend.open_session(10.0, "first")  # creates the layout
    assert backend.acquire(opened.session_id, name) is not None
    assert [info.name for info in backend.leases()] == [name]
    assert raw.exists(f"{root}/leases") is not None and raw.exists(f"{root}/clock") is not None


def test_remaining_is_the_lease_bounded_by_the_negotiated_timeout(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    # the test server grants 0.2 s to 60 s
    long = backend.open_session(90.0, "long")
    assert long.remaining == pytest.approx(60.0)
    assert backend.keep_alive(long.session_id, 90.0).remaining == pytest.approx(60.0)
    short = backend.open_session(0.15, "short")
    assert short.remaining == pytest.approx(0.15)
    middle = backend.open_session(7.5, "middle")
    assert middle.remaining == pytest.approx(7.5)


def test_heartbeats_alone_never_keep_a_lease(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient, name: str
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    lease = 1.0
    opened_at = time.monotonic()
    sid = backend.open_session(lease, "never renewed").session_id
    assert backend.acquire(sid, name) is not None
    # kazoo pings every third of the session timeout; the ZooKeeper session alone would live on
    wait_until(lambda: held_node(raw, name) is None, lease + 2, message="watchdog close")
    closed_after = time.monotonic() - opened_at
    assert closed_after >= lease - 0.05, closed_after
    with pytest.raises(SessionExpired):
        backend.keep_alive(sid, lease)


def test_a_suspend_the_local_clock_counted_ends_the_session_soon_after_the_resume(
    zookeeper_server: ZookeeperNode,
    make_backend: BackendFactory,
    raw: KazooClient,
    name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    lease = 30.0
    sid = backend.open_session(lease, "suspended").session_id
    assert backend.acquire(sid, name) is not None
    # The host slept through the lease: the local clock (CLOCK_BOOTTIME) counted it, Python's
    # monotonic clock, which the watchdog's wait runs on, did not.
    for module in (session_module, watchdog_module):
        monkeypatch.setattr(module, "local_clock", lambda: local_clock() + lease + 1, raising=False)
    wait_until(lambda: held_node(raw, name) is None, 5, message="the watchdog closed the session")
    with pytest.raises(SessionExpired):
        backend.keep_alive(sid, lease)


def test_keep_alives_keep_a_session_past_its_lease(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, name: str
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    lease = 0.6
    sid = backend.open_session(lease, "renewed").session_id
    grant = backend.acquire(sid, name)
    assert grant is not None
    deadline = time.monotonic() + lease * 4
    while time.monotonic() < deadline:
        assert backend.keep_alive(sid, lease).owned == {name: grant.token}
        time.sleep(lease / 4)
    info = backend.owner(name)
    assert info is not None and info.session_id == sid


def test_session_expired_by_the_server_stays_expired(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient, name: str
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    sid = backend.open_session(10.0, "to be expired").session_id
    assert backend.acquire(sid, name) is not None
    _expire_on_server(zookeeper_server, backend, sid)
    wait_until(lambda: held_node(raw, name) is None, 10, message="the server expiring it")

    def expired() -> bool:
        try:
            backend.keep_alive(sid, 10.0)
        except SessionExpired:
            return True
        except BackendUnavailable:
            pass  # the server dropped the connection; kazoo learns of the expiry on reconnecting
        return False

    wait_until(expired, 10, message="keep-alive raising SessionExpired")
    with pytest.raises(SessionExpired):
        backend.keep_alive(sid, 10.0)  # for good
    with pytest.raises(SessionExpired):
        backend.acquire(sid, name)
    with pytest.raises(SessionExpired):
        backend.join(sid, name)
    # kazoo would reconnect under a new ZooKeeper session; the backend never lets it own anything
    assert held_node(raw, name) is None
    assert sid not in {s.session_id for s in backend.sessions()}
    fresh = backend.open_session(10.0, "fresh").session_id
    assert fresh != sid and backend.acquire(fresh, name) is not None


def _expire_on_server(server: ZookeeperNode, backend: ZookeeperBackend, sid: str) -> None:
    """Close the ZooKeeper session from another connection, as kazoo's own test harness does."""
    session = backend._session(sid)
    intruder = KazooClient(hosts=server.hosts, client_id=session.client.client_id)
    intruder.start(10)
    intruder.stop()
    intruder.close()


def test_keep_alive_round_trips_do_not_grow_with_leases(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = make_backend(zookeeper_server.hosts, timeout=30.0)
    sid = backend.open_session(60.0, "many leases").session_id
    client = backend._session(sid).client
    sent: list[str] = []
    queue: Callable[[object, object], object] = client._call

    def counted(request: object, result: object) -> object:
        sent.append(type(request).__name__)
        return queue(request, result)

    monkeypatch.setattr(client, "_call", counted)  # every request of this client, pings aside
    per_keep_alive = {}
    held = 0
    for count in (1, 1000):
        while held < count:
            assert backend.acquire(sid, f"{name}.{held}") is not None
            held += 1
        sent.clear()
        renewal = backend.keep_alive(sid, 60.0)
        per_keep_alive[count] = list(sent)
        assert len(renewal.owned) == count
    # one round trip: the session node's write and getEphemerals, sent back to back
    assert per_keep_alive == {1: ["SetData", "GetEphemerals"], 1000: ["SetData", "GetEphemerals"]}


def test_groups_live_in_container_nodes(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient, name: str
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    sid = backend.open_session(10.0, "member").session_id
    backend.join(sid, name)
    assert raw.exists(f"/simba/groups/{name}") is not None
    backend.leave(sid, name)
    # the test servers look for empty containers every 500 ms (a persistent node would stay)
    wait_until(lambda: raw.exists(f"/simba/groups/{name}") is None, 5, message="container removal")
    backend.join(sid, name)  # a group removed by the server is created again
    assert [m.session_id for m in backend.members(name)] == [sid]


def test_after_fork_the_child_leaves_the_parents_session_alone(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, name: str
) -> None:
    backend = make_backend(zookeeper_server.hosts)
    sid = backend.open_session(10.0, "parent").session_id
    grant = backend.acquire(sid, name)
    assert grant is not None
    pid = os.fork()
    if pid == 0:  # the child: a session of its own, then exit without closing anything inherited
        code = 1
        try:
            backend.after_fork()
            child = backend.open_session(10.0, "child").session_id
            code = 0 if child != sid and backend.acquire(child, name) is None else 2
            backend.close()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert backend.keep_alive(sid, 10.0).owned == {name: grant.token}
    info = backend.owner(name)
    assert info is not None and info.session_id == sid
