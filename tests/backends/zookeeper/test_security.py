"""Digest credentials and ACLs against real servers (TLS: ``test_tls.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, OPEN_ACL_UNSAFE, make_acl, make_digest_acl

from django_simba.spi import BackendUnavailable
from tests.servers.zookeeper import ZookeeperNode

from .conftest import BackendFactory, held_node

pytestmark = pytest.mark.zookeeper

DIGEST = [("digest", "simba:secret")]


def everyone_reads(path: str) -> Sequence[ACL]:
    """An ACL provider: the backend's user may do anything, everyone else may only read."""
    return [make_digest_acl("simba", "secret", all=True), make_acl("world", "anyone", read=True)]


@pytest.fixture
def name() -> str:
    return f"acl.{uuid.uuid4().hex[:12]}"


def _raw(hosts: str, auth: list[tuple[str, str]] | None = None) -> KazooClient:
    client = KazooClient(hosts=hosts, auth_data=auth)
    client.start(10)
    return client


def test_client_without_the_credentials_cannot_delete_a_lease_node(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, root: str, name: str
) -> None:
    hosts = zookeeper_server.hosts
    secured = make_backend(hosts, root=root, auth=DIGEST)  # acl "auto": creator-only with credentials
    sid = secured.open_session(10.0, "secured").session_id
    grant = secured.acquire(sid, name)
    assert grant is not None
    owner_client = _raw(hosts, DIGEST)
    held = held_node(owner_client, name, root)
    assert held is not None
    path = held[0]
    for auth in (None, [("digest", "intruder:guess")]):
        intruder = _raw(hosts, auth)
        try:
            with pytest.raises(NoAuthError):
                intruder.delete(path)
            with pytest.raises(NoAuthError):
                intruder.create(f"{root}/leases/{name}/0000000000000000-0000000000", b"", ephemeral=True)
        finally:
            intruder.stop()
            intruder.close()
    anonymous = make_backend(hosts, root=root)
    with pytest.raises(BackendUnavailable, match="NoAuth"):
        anonymous.force_release(name)
    info = secured.owner(name)
    assert info is not None and info.session_id == sid and info.token == grant.token
    try:
        acl, _ = owner_client.get_acls(path)
        assert [(entry.id.scheme, entry.id.id.split(":")[0]) for entry in acl] == [("digest", "simba")]
        parent_acl, _ = owner_client.get_acls(f"{root}/leases/{name}")  # the line decides who may delete
        assert [entry.id.scheme for entry in parent_acl] == ["digest"]
    finally:
        owner_client.stop()
        owner_client.close()
    operator = make_backend(hosts, root=root, auth=DIGEST)  # same credentials: may force-release
    assert operator.force_release(name) is True
    assert secured.keep_alive(sid, 10.0).owned == {}


def test_nodes_are_open_without_credentials(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, root: str, name: str
) -> None:
    backend = make_backend(zookeeper_server.hosts, root=root)
    sid = backend.open_session(10.0, "open").session_id
    assert backend.acquire(sid, name) is not None
    anyone = _raw(zookeeper_server.hosts)
    try:
        held = held_node(anyone, name, root)
        assert held is not None
        acl, _ = anyone.get_acls(held[0])
        assert acl == OPEN_ACL_UNSAFE
        anyone.delete(held[0])  # the documented hazard of the default
    finally:
        anyone.stop()
        anyone.close()
    assert backend.keep_alive(sid, 10.0).owned == {}


def test_acl_provider_by_dotted_path(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, root: str, name: str
) -> None:
    backend = make_backend(zookeeper_server.hosts, root=root, auth=DIGEST, acl=f"{__name__}.everyone_reads")
    sid = backend.open_session(10.0, "readable").session_id
    grant = backend.acquire(sid, name)
    assert grant is not None
    reader = make_backend(zookeeper_server.hosts, root=root)  # no credentials: may observe only
    info = reader.owner(name)
    assert info is not None and info.session_id == sid and info.metadata == "readable"
    with pytest.raises(BackendUnavailable, match="NoAuth"):
        reader.force_release(name)
    with pytest.raises(BackendUnavailable, match="NoAuth"):
        reader.open_session(10.0, "cannot create under the root")
