"""ACLs that hold on nodes the backend did not create (issue 28.1), on a server of the test's own.

With digest credentials the backend creates its nodes creator-only; nodes that already exist
keep their ACL. A node the backend relies on whose ACL lets anyone else in is refused: at
start for the root and the nodes under it, when first met for a line or a group.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.security import ACL, make_acl, make_digest_acl

from django_simba import UnsafeAcl
from django_simba.backends.zookeeper.acls import describe, excess
from tests.servers.zookeeper import ZookeeperNode

from .conftest import BackendFactory, kazoo_client

pytestmark = pytest.mark.zookeeper

DIGEST = [("digest", "simba:secret")]
OURS = [make_digest_acl("simba", "secret", all=True)]


@pytest.fixture
def anonymous(raw: KazooClient) -> KazooClient:
    """A client without credentials: another tenant, an earlier run, an intruder."""
    return raw


@pytest.fixture
def operator(zookeeper_server: ZookeeperNode) -> Iterator[KazooClient]:
    """The operator, with the backend's credentials, fixing ACLs by hand."""
    with kazoo_client(zookeeper_server.hosts, DIGEST) as client:
        yield client


def members_left(client: KazooClient, path: str) -> list[str]:
    """The children of a line or group; none once the server swept it (an empty container node)."""
    try:
        return list(client.get_children(path))
    except NoNodeError:
        return []


def test_a_root_another_client_created_open_is_refused_at_start(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, anonymous: KazooClient, root: str
) -> None:
    anonymous.create(root)  # first, without credentials: world:anyone:cdrwa
    backend = make_backend(zookeeper_server.hosts, root=root, auth=DIGEST)
    with pytest.raises(UnsafeAcl, match=f"node {root} has the ACL \\[world:anyone:cdrwa\\]") as refused:
        backend.open_session(10.0, "secured")
    message = str(refused.value)
    assert "grants world:anyone:cdrwa beyond the ACL the backend gives it [creator:cdrwa]" in message
    assert "secret" not in message
    assert refused.value.check_id == "django_simba.E025"
    assert backend.sessions() == []  # no session was handed out, none lingers
    # what it protects from: under the open root the intruder could remove the backend's parents
    # and plant a line of its own; the backend never ran there


def test_nodes_an_earlier_open_run_left_are_refused_one_by_one_as_the_operator_fixes_them(
    zookeeper_server: ZookeeperNode,
    make_backend: BackendFactory,
    anonymous: KazooClient,
    operator: KazooClient,
    root: str,
    name: str,
) -> None:
    hosts = zookeeper_server.hosts
    earlier = make_backend(hosts, root=root)  # the open default: every node world:anyone:cdrwa
    sid = earlier.open_session(10.0, "earlier run").session_id
    assert earlier.acquire(sid, name) is not None
    earlier.close_session(sid)
    line, open_to_all = f"{root}/leases/{name}", [make_acl("world", "anyone", all=True)]
    # The earlier run's empty line, kept open, as a plain node: the server may sweep the container
    # the backend made at any moment, and the test would race its sweeper.
    with contextlib.suppress(NoNodeError):
        anonymous.delete(line)
    anonymous.create(line, acl=open_to_all)
    secured = make_backend(hosts, root=root, auth=DIGEST)
    with pytest.raises(UnsafeAcl, match=f"node {root} has"):
        secured.open_session(10.0, "secured")
    anonymous.set_acls(root, OURS)  # the root alone fixed (not recursively)
    with pytest.raises(UnsafeAcl, match=f"node {root}/leases has"):
        secured.open_session(10.0, "secured")
    for node in ("leases", "groups", "sessions", "clock"):
        operator.set_acls(f"{root}/{node}", OURS)
    sid = secured.open_session(10.0, "secured").session_id  # every node it relies on is its own
    other = f"{name}.new"
    assert secured.acquire(sid, other) is not None  # a line it creates itself
    with pytest.raises(UnsafeAcl, match=f"node {root}/leases/{name} has the ACL \\[world:anyone:cdrwa\\]"):
        secured.acquire(sid, name)  # the earlier run's line, still open, met now
    assert members_left(operator, f"{root}/leases/{name}") == []  # it left the line again
    assert secured.keep_alive(sid, 10.0).owned == {other: secured.owner(other).token}  # type: ignore[union-attr]
    with contextlib.suppress(NoNodeError):  # a line the server swept is made anew, with our ACL
        operator.set_acls(f"{root}/leases/{name}", OURS)
    assert secured.acquire(sid, name) is not None  # fixed: used at once


def test_a_group_node_open_to_others_is_refused_when_first_joined(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, operator: KazooClient, root: str, name: str
) -> None:
    secured = make_backend(zookeeper_server.hosts, root=root, auth=DIGEST)
    sid = secured.open_session(10.0, "secured").session_id
    anyone_adds_and_removes = make_acl("world", "anyone", create=True, delete=True)
    operator.create(f"{root}/groups/{name}", acl=[*OURS, anyone_adds_and_removes])
    with pytest.raises(UnsafeAcl, match=f"{root}/groups/{name} has the ACL"):
        secured.join(sid, name)
    assert members_left(operator, f"{root}/groups/{name}") == []  # it left again
    assert secured.members(name) == []


def test_a_provider_granting_others_reads_accepts_nodes_that_grant_them_reads(
    zookeeper_server: ZookeeperNode, make_backend: BackendFactory, operator: KazooClient, root: str, name: str
) -> None:
    readable = [*OURS, make_acl("world", "anyone", read=True)]
    operator.create(root, acl=readable)  # made beforehand, as the provider says
    backend = make_backend(zookeeper_server.hosts, root=root, auth=DIGEST, acl=f"{__name__}.everyone_reads")
    sid = backend.open_session(10.0, "readable").session_id
    assert backend.acquire(sid, name) is not None


def everyone_reads(path: str) -> list[ACL]:
    return [*OURS, make_acl("world", "anyone", read=True)]


@pytest.mark.django_db(databases="__all__")
def test_check_deploy_reports_the_unsafe_node_as_e025(
    zookeeper_server: ZookeeperNode, anonymous: KazooClient, root: str
) -> None:
    anonymous.create(root)
    simba = {
        "BACKEND": "zookeeper",
        "OPTIONS": {"hosts": zookeeper_server.hosts, "root": root, "auth": DIGEST},
        "LEASE_DURATION": 3,
        "RENEW_INTERVAL": 1,
        "TIMEOUT": 1,
    }
    refused = rf"django_simba\.E025.*node {root} has the ACL"
    with override_settings(SIMBA=simba), pytest.raises(SystemCheckError, match=refused) as failed:
        call_command("check", "--deploy", "--tag", "simba")
    assert "setAcl" in str(failed.value) and "secret" not in str(failed.value)


def test_what_counts_as_broader() -> None:
    us = ("digest", "simba:hash")
    creator = [make_acl("auth", "", all=True)]
    ours = make_acl("digest", "simba:hash", all=True)
    assert excess([ours], creator, [us]) == []
    everyone_reads = make_acl("world", "anyone", read=True)
    assert excess([ours, everyone_reads], creator, [us]) == [everyone_reads]
    assert excess([everyone_reads], [ours, everyone_reads], [us]) == []
    intruder = make_acl("digest", "mallory:hash", read=True)
    assert excess([intruder], [*creator, make_acl("world", "anyone", write=True)], [us]) == [intruder]
    assert describe([ours, everyone_reads, *creator]) == "digest:simba:cdrwa, world:anyone:r, creator:cdrwa"
