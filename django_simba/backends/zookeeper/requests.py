"""The requests a session sends, each as a function of its kazoo client.

``ZkSession.send`` queues them back to back and numbers them (``Sent``); nothing else queues a
request on a session's client, so the numbers are the order in which ZooKeeper answers them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from kazoo.client import KazooClient
from kazoo.protocol.states import WatchedEvent

from .client import create_container_async, get_ephemerals_async

Request = Callable[[KazooClient], Any]  # queues one request, returns kazoo's async result


class Sent(NamedTuple):
    """A queued request: kazoo's async result, and its place in the session's request order."""

    result: Any
    seq: int


def create(
    path: str, data: bytes, acl: list[Any], *, sequence: bool = False, with_stat: bool = True
) -> Request:
    """An ephemeral node; the reply is its path, and with ``with_stat`` its stat too."""
    return lambda zk: zk.create_async(
        path, data, acl=acl, ephemeral=True, sequence=sequence, include_data=with_stat
    )


def create_container(path: str, acl: list[Any]) -> Request:
    return lambda zk: create_container_async(zk, path, acl)


def write(path: str, data: bytes) -> Request:
    return lambda zk: zk.set_async(path, data)


def delete(path: str) -> Request:
    return lambda zk: zk.delete_async(path)


def exists(path: str, watch: Callable[[WatchedEvent], None] | None = None) -> Request:
    """The node's stat, or ``None``; ``watch`` fires on its next change."""
    return lambda zk: zk.exists_async(path, watch=watch)


def acls(path: str) -> Request:
    """The node's ACL and stat."""
    return lambda zk: zk.get_acls_async(path)


def children(path: str) -> Request:
    return lambda zk: zk.get_children_async(path)


def own_ephemerals(prefix: str) -> Request:
    """The paths of the session's own ephemeral nodes under ``prefix`` (server paths)."""
    return lambda zk: get_ephemerals_async(zk, prefix)
