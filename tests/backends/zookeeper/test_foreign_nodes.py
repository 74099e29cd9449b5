"""Nodes planted in lines and groups by a client that is not a session of the backend.

The attack of issue 28: where the ACL lets anyone in (the open default, or a root some other
client created), an unauthenticated client deletes the holder's node and plants a persistent
node with a session-like name at the head of the line. It is never a holder, never blocks a
grant, and is logged once; a planted member is never listed.
"""

from __future__ import annotations

import logging

import pytest
from kazoo.client import KazooClient

from django_simba.backends.zookeeper import ZookeeperBackend
from django_simba.engine import Engine, EngineConfig, ThreadRuntime
from django_simba.spi import Notification, NotificationKind
from django_simba.testing import wait_until
from tests.servers.zookeeper import ZookeeperNode

from .conftest import BackendFactory, held_node

pytestmark = pytest.mark.zookeeper

HANDED_OVER = NotificationKind.HANDED_OVER
PLANTED = "0000000000000000-0000000000"  # sorts before every node the server numbers


@pytest.fixture
def intruder(raw: KazooClient) -> KazooClient:
    """A plain client without credentials."""
    return raw


def plant(intruder: KazooClient, root: str, name: str) -> str:
    """Delete the holder's node and plant a persistent one at the head of the line."""
    directory = f"{root}/leases/{name}"
    for child in intruder.get_children(directory):
        intruder.delete(f"{directory}/{child}")
    return str(intruder.create(f"{directory}/{PLANTED}", b"mine now"))


def test_a_planted_node_is_no_holder_and_blocks_no_grant(
    zookeeper_server: ZookeeperNode,
    make_backend: BackendFactory,
    intruder: KazooClient,
    root: str,
    name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="django_simba.backends.zookeeper")
    backend = make_backend(zookeeper_server.hosts, root=root)
    first = backend.open_session(10.0, "first").session_id
    assert backend.acquire(first, name) is not None
    planted = plant(intruder, root, name)
    assert backend.keep_alive(first, 10.0).owned == {}  # its node was deleted: the term is gone
    assert backend.owner(name) is None  # the planted node holds nothing
    second = backend.open_session(10.0, "second").session_id
    grant = backend.acquire(second, name)  # a try-acquire, not refused because of it
    assert grant is not None
    info = backend.owner(name)
    assert info is not None and (info.session_id, info.token) == (second, grant.token)
    assert [(lease.name, lease.session_id) for lease in backend.leases(name)] == [(name, second)]
    assert backend.force_release(name) is True  # the holder's node, not the planted one
    assert intruder.exists(planted) is not None and backend.owner(name) is None
    assert backend.keep_alive(second, 10.0).owned == {}
    warned = [r.getMessage() for r in caplog.records if planted in r.getMessage()]
    assert len(warned) == 1 and "a persistent node" in warned[0], warned


def test_a_waiter_behind_a_planted_node_is_handed_the_name(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, intruder: KazooClient, root: str, name: str
) -> None:
    backend = make_backend(zookeeper_server.hosts, root=root)
    handed: list[Notification] = []
    backend.subscribe(lambda event: handed.append(event) if event.kind is HANDED_OVER else None)
    holder = backend.open_session(10.0, "holder").session_id
    assert backend.acquire(holder, name) is not None
    intruder.create(f"{root}/leases/{name}/{PLANTED}", b"")  # ahead of everyone
    waiter = backend.open_session(10.0, "waiter").session_id
    assert backend.acquire(waiter, name, wait=True) is None  # the holder is a session's: wait
    backend.release(holder, name)
    wait_until(lambda: any(event.session_id == waiter for event in handed), 5, message="the hand-over")
    info = backend.owner(name)
    assert info is not None and info.session_id == waiter


def test_an_engine_locks_a_name_whose_line_has_a_planted_node(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, intruder: KazooClient, root: str, name: str
) -> None:
    backend = make_backend(zookeeper_server.hosts, root=root)
    opener = backend.open_session(10.0, "made the line").session_id
    assert backend.acquire(opener, name) is not None
    plant(intruder, root, name)
    backend.close_session(opener)
    engine = Engine(backend, EngineConfig(lease_duration=4.0, renew_interval=1.0), ThreadRuntime())
    try:
        lock = engine.lock(name)
        term = lock.acquire(5)
        assert term.is_valid()
        held = held_node(intruder, name, root)  # the planted node heads the line by name...
        assert held is not None and held[0].endswith(PLANTED)
        info = backend.owner(name)  # ... yet the engine's session holds the name
        assert info is not None and info.session_id == term.session_id and info.token == term.token
        lock.release()
    finally:
        engine.close()


def test_a_planted_member_is_never_listed(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, intruder: KazooClient, root: str, name: str
) -> None:
    backend: ZookeeperBackend = make_backend(zookeeper_server.hosts, root=root)
    member = backend.open_session(10.0, "member").session_id
    backend.join(member, name)
    forged = "00000000deadbeef"
    intruder.create(f"{root}/groups/{name}/{forged}", b"a forged member")
    assert [m.session_id for m in backend.members(name)] == [member]
    assert [m.session_id for m in backend.groups(name)[name]] == [member]
