"""Empty lines and group nodes deleted by the session that emptied them (issue 28.4), and the
races around it.

The server here sweeps empty containers only every ten minutes (production: every minute, at
most 10,000 a minute), so what is deleted is deleted by the backend.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from django_simba.backends.zookeeper import ZookeeperBackend, idle
from django_simba.testing import wait_until
from tests.servers.zookeeper import ZookeeperNode, serving, zookeeper_standalone

from .conftest import BackendFactory, kazoo_client

pytestmark = pytest.mark.zookeeper

NO_SWEEP = ["-Dznode.container.checkIntervalMs=600000"]  # after the suite's own 500 ms: it wins


@pytest.fixture(scope="module")
def server() -> Iterator[ZookeeperNode]:
    with serving(lambda: zookeeper_standalone(jvm_options=NO_SWEEP), "a ZooKeeper that never sweeps") as node:
        yield node


@pytest.fixture
def raw(server: ZookeeperNode) -> Iterator[KazooClient]:
    with kazoo_client(server.hosts) as client:
        yield client


def lines(raw: KazooClient, root: str) -> set[str]:
    return set(raw.get_children(f"{root}/leases"))


def groups(raw: KazooClient, root: str) -> set[str]:
    return set(raw.get_children(f"{root}/groups"))


def session_of(
    make_backend: BackendFactory, server: ZookeeperNode, root: str, label: str
) -> tuple[ZookeeperBackend, str]:
    """A backend of its own (another process) and a session on it."""
    backend = make_backend(server.hosts, root=root)
    return backend, backend.open_session(10.0, label).session_id


def lock_and_release(backend: ZookeeperBackend, sid: str, name: str) -> int:
    """The token of a term taken and given back at once."""
    grant = backend.acquire(sid, name)
    assert grant is not None
    backend.release(sid, name, grant.token)
    return grant.token


def assert_deleted_after_an_idle_interval(
    backend: ZookeeperBackend, sid: str, names: list[str], nodes: Callable[[], set[str]]
) -> None:
    """The session emptied the nodes of ``names`` (200): they go once idle a whole interval."""
    assert nodes() == set(names)  # one empty node per name, until...
    backend.keep_alive(sid, 10.0)
    assert nodes() == set(names)  # ... they stayed idle a whole interval
    backend.keep_alive(sid, 10.0)  # sends the deletes once answered, not waiting for them
    wait_until(lambda: len(nodes()) == len(names) - idle.PER_KEEP_ALIVE, 5, message="deletes")
    backend.keep_alive(sid, 10.0)  # and the rest with the next
    wait_until(lambda: nodes() == set(), 5, message="the idle nodes deleted")


def test_the_lines_of_released_names_go_after_an_idle_interval_and_tokens_go_on_up(
    server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient, root: str
) -> None:
    backend, sid = session_of(make_backend, server, root, "per-object locks")
    names = [f"invoice:{n}" for n in range(200)]
    tokens = {name: lock_and_release(backend, sid, name) for name in names}
    assert_deleted_after_an_idle_interval(backend, sid, names, lambda: lines(raw, root))
    for name in names[:20]:  # made again, with tokens above the old ones
        grant = backend.acquire(sid, name)
        assert grant is not None and grant.token > tokens[name]
    assert lines(raw, root) == set(names[:20])


def test_a_name_taken_again_within_an_interval_keeps_its_line(
    server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient, root: str
) -> None:
    backend, sid = session_of(make_backend, server, root, "a hot lock")
    for _ in range(3):
        lock_and_release(backend, sid, "hot")
        backend.keep_alive(sid, 10.0)
    assert lines(raw, root) == {"hot"}


def test_a_line_another_session_joined_is_not_deleted(
    server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient, root: str
) -> None:
    emptied, first = session_of(make_backend, server, root, "emptied it")
    joined, second = session_of(make_backend, server, root, "joined it")
    token = lock_and_release(emptied, first, "shared")
    taken = joined.acquire(second, "shared")  # its node is in the line before the delete is sent
    assert taken is not None and taken.token > token
    emptied.keep_alive(first, 10.0)
    emptied.keep_alive(first, 10.0)  # the delete fails: the line is not empty
    emptied.keep_alive(first, 10.0)  # (answered after the one before, and its delete)
    assert lines(raw, root) == {"shared"}
    assert joined.keep_alive(second, 10.0).owned == {"shared": taken.token}


def test_a_session_that_knew_the_line_makes_it_again_after_the_delete(
    server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient, root: str
) -> None:
    emptied, first = session_of(make_backend, server, root, "emptied it")
    knew, second = session_of(make_backend, server, root, "knew it")
    earlier = lock_and_release(knew, second, "name")  # this session has seen the line
    knew.keep_alive(second, 10.0)  # its own idle interval starts, but it takes the name again below
    token = lock_and_release(emptied, first, "name")
    assert token > earlier
    emptied.keep_alive(first, 10.0)
    emptied.keep_alive(first, 10.0)
    wait_until(lambda: lines(raw, root) == set(), 5, message="deleted under the session that knew it")
    again = knew.acquire(second, "name")  # its create finds no line: it makes it and joins
    assert again is not None and again.token > token
    assert lines(raw, root) == {"name"}


def race_while_renewing(
    server: ZookeeperNode,
    make_backend: BackendFactory,
    root: str,
    work: Callable[[ZookeeperBackend, str, int], None],
) -> None:
    """Two processes run ``work(backend, session, index)`` as fast as they can while both renew
    (and so delete the nodes they emptied) every few milliseconds; no error in either."""
    backends = [make_backend(server.hosts, root=root) for _ in range(2)]
    pairs = [(backend, backend.open_session(10.0, f"p{i}").session_id) for i, backend in enumerate(backends)]
    errors: list[BaseException] = []
    stop = threading.Event()

    def run(work: Callable[..., None], *args: object) -> None:
        try:
            work(*args)
        except BaseException as error:
            errors.append(error)

    def renew(backend: ZookeeperBackend, sid: str) -> None:
        while not stop.wait(0.005):
            backend.keep_alive(sid, 10.0)

    workers = [threading.Thread(target=run, args=(work, b, s, i)) for i, (b, s) in enumerate(pairs)]
    renewers = [threading.Thread(target=run, args=(renew, *pair)) for pair in pairs]
    for thread in [*workers, *renewers]:
        thread.start()
    for thread in workers:
        thread.join(120)
    stop.set()
    for thread in renewers:
        thread.join(10)
    assert not errors, errors


def test_deletes_racing_acquires_never_lose_a_grant_nor_let_a_token_go_back(
    server: ZookeeperNode, make_backend: BackendFactory, root: str
) -> None:
    """Two processes lock and release a few names while deleting the lines they emptied."""
    names = ["a", "b", "c"]
    mutex = threading.Lock()
    granted: dict[str, list[int]] = {name: [] for name in names}

    def lock_loop(backend: ZookeeperBackend, sid: str, offset: int) -> None:
        for n in range(300):
            name = names[(n + offset) % len(names)]
            grant = backend.acquire(sid, name)
            if grant is None:
                continue
            with mutex:  # holders are exclusive: records come in grant order
                granted[name].append(grant.token)
            backend.release(sid, name, grant.token)

    race_while_renewing(server, make_backend, root, lock_loop)
    for name, tokens in granted.items():
        assert tokens and all(a < b for a, b in itertools.pairwise(tokens)), (name, tokens)
    assert sum(map(len, granted.values())) > 300


def test_idle_lines_wait_a_whole_interval_and_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(idle, "REMEMBERED", 3)
    monkeypatch.setattr(idle, "PER_KEEP_ALIVE", 2)
    lines = idle.IdleNodes()
    assert [lines.emptied(name) for name in ("a", "b", "c")] == [None, None, None]
    assert lines.emptied("d") == "a"  # too many wait: the oldest's line goes at once
    assert lines.due() == []  # released since the last keep-alive: not idle a whole interval yet
    lines.touched("c")  # taken again: in use
    lines.emptied("e")
    assert lines.due() == ["b", "d"]  # idle since before the last keep-alive, two at most
    assert lines.due() == ["e"]
    assert len(lines) == 0


# -- group nodes ---------------------------------------------------------------------------------


def test_the_group_nodes_a_session_emptied_go_after_an_idle_interval(
    server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient, root: str
) -> None:
    backend, sid = session_of(make_backend, server, root, "per-object groups")
    names = [f"report:{n}" for n in range(200)]
    for name in names:
        backend.join(sid, name)
        backend.leave(sid, name)
    assert_deleted_after_an_idle_interval(backend, sid, names, lambda: groups(raw, root))
    backend.join(sid, names[0])  # made again
    assert [member.session_id for member in backend.members(names[0])] == [sid]
    assert groups(raw, root) == {names[0]}


def test_a_group_joined_again_within_an_interval_or_by_another_session_keeps_its_node(
    server: ZookeeperNode, make_backend: BackendFactory, raw: KazooClient, root: str
) -> None:
    emptied, first = session_of(make_backend, server, root, "left it")
    stays, second = session_of(make_backend, server, root, "stays in it")
    emptied.join(first, "shared")
    emptied.leave(first, "shared")
    stays.join(second, "shared")  # its member node is in the group before the delete is sent
    for _ in range(3):
        emptied.join(first, "hot")
        emptied.leave(first, "hot")
        emptied.keep_alive(first, 10.0)  # the second sends the delete of "shared", which fails:
        # the node is not empty (the third is answered after it)
    assert groups(raw, root) == {"shared", "hot"}
    assert [member.session_id for member in stays.members("shared")] == [second]


def test_deletes_racing_joins_never_lose_a_membership(
    server: ZookeeperNode, make_backend: BackendFactory, root: str
) -> None:
    """Two processes join and leave a few groups while deleting the group nodes they emptied:
    every join holds."""
    names = ["a", "b", "c"]
    joined = [0, 0]

    def join_loop(backend: ZookeeperBackend, sid: str, index: int) -> None:
        for n in range(150):
            group = names[(n + index) % len(names)]
            backend.join(sid, group)
            assert sid in {member.session_id for member in backend.members(group)}, (sid, group)
            joined[index] += 1
            backend.leave(sid, group)

    race_while_renewing(server, make_backend, root, join_loop)
    assert joined == [150, 150]
