"""A Redis that forgets: restarts without persistence, FLUSHALL/FLUSHDB, snapshots, failovers.

Each test runs on a redis-server (or cluster) of its own, never the shared one. After the
server lost its data the grant scripts hold new terms back for the longest lease they know,
counted from when they noticed, so that a holder of a forgotten term has stopped trusting it
(its local deadline is at most one lease after its last renewal was sent) before anybody else
gets the name; the next tokens come from the server's clock, above every earlier one; and one
WARNING says so. With AOF nothing changes. See ``lua/_marker.lua``.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.spi import Grant, Renewal, SessionExpired
from django_simba.spi.clock import local_clock
from django_simba.testing import wait_until
from tests.servers.redis_cluster import RedisClusterProcesses, RedisProcess, redis_cluster, redis_server

from .conftest import once_reachable

pytestmark = pytest.mark.redis

LEASE = 2.0
DRIFT = 0.01  # the engine's default: a holder trusts a grant until sent + remaining * (1 - DRIFT)
LOGGER = "django_simba.backends.redis"


@dataclass
class Held:
    """A holder's view of its term: the token and the local deadline it trusts it until."""

    session_id: str
    grant: Grant
    trusted_until: float


def hold(backend: RedisBackend, name: str, lease: float = LEASE) -> Held:
    sid = backend.open_session(lease, "holder").session_id
    sent = local_clock()
    grant = backend.acquire(sid, name)
    assert grant is not None
    return Held(sid, grant, sent + grant.remaining * (1 - DRIFT))


def tokens_of(backend: RedisBackend, name: str, rounds: int = 3) -> list[int]:
    sid = backend.open_session(LEASE, "cycling").session_id
    tokens = []
    for _ in range(rounds):
        grant = backend.acquire(sid, name)
        assert grant is not None
        tokens.append(grant.token)
        backend.release(sid, name)
    backend.close_session(sid)
    return tokens


def first_grant(backend: RedisBackend, name: str, timeout: float = 15) -> tuple[Grant, float, int]:
    """Try ``name`` every 20 ms from a new session until granted, then give it up again.

    Returns the grant, the local time its request was sent, and the refusals before it.
    """
    sid = once_reachable(lambda: backend.open_session(LEASE, "contender").session_id)
    assert isinstance(sid, str)
    refusals = 0
    deadline = renewed = time.monotonic()
    deadline += timeout
    while time.monotonic() < deadline:
        if time.monotonic() - renewed > LEASE / 4:  # as its engine would: the session outlives the wait
            backend.keep_alive(sid, LEASE)
            renewed = time.monotonic()
        sent = local_clock()
        grant = backend.acquire(sid, name)
        if grant is not None:
            backend.close_session(sid)  # and with it the name
            return grant, sent, refusals
        refusals += 1
        time.sleep(0.02)
    raise AssertionError(f"{name} was never granted within {timeout} s")


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The hold-back warnings (other tests' pub/sub threads may warn of their own servers meanwhile)."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == LOGGER and r.levelno == logging.WARNING and "no new term" in r.getMessage()
    ]


@pytest.fixture
def backend(own_redis: RedisProcess) -> Iterator[RedisBackend]:
    made = RedisBackend({"url": own_redis.url}, timeout=2)
    yield made
    made.close()


def kill_and_start(server: RedisProcess) -> None:
    server.kill()
    server.start()


def flushall(server: RedisProcess) -> None:
    with server.client() as admin:
        admin.flushall()


def flushdb(server: RedisProcess) -> None:
    with server.client() as admin:
        admin.flushdb()


@pytest.mark.parametrize(
    "lose", [kill_and_start, flushall, flushdb], ids=["SIGKILL+start", "FLUSHALL", "FLUSHDB"]
)
def test_after_a_loss_nobody_gets_a_name_its_holder_may_still_trust(
    own_redis: RedisProcess,
    backend: RedisBackend,
    caplog: pytest.LogCaptureFixture,
    lose: Callable[[RedisProcess], None],
) -> None:
    before = tokens_of(backend, "job")
    assert before == list(range(before[0], before[0] + 3))  # one apart while the server keeps its data
    holder = hold(backend, "job")
    lost_at = local_clock()
    lose(own_redis)
    caplog.set_level(logging.WARNING, LOGGER)

    grant, sent, refusals = first_grant(backend, "job")
    assert sent >= holder.trusted_until, "granted while the holder of the forgotten term still trusted it"
    assert sent - lost_at < LEASE + 1.0  # held back one lease from when it was noticed, not longer
    assert refusals > 10
    assert grant.token > max(*before, holder.grant.token)
    with pytest.raises(SessionExpired):
        once_reachable(lambda: backend.keep_alive(holder.session_id, LEASE))
    found = warnings_of(caplog)
    assert len(found) == 1, found  # one warning, not one per refused attempt
    assert "no new term of any name is granted there" in found[0] and own_redis.url[8:] in found[0]


@pytest.mark.parametrize(
    "lose", [kill_and_start, flushall, flushdb], ids=["SIGKILL+start", "FLUSHALL", "FLUSHDB"]
)
def test_a_holder_that_notices_the_loss_at_its_keep_alive_warns_once_and_so_does_each_process(
    own_redis: RedisProcess, caplog: pytest.LogCaptureFixture, lose: Callable[[RedisProcess], None]
) -> None:
    """The holder's keep-alive is the first reply after the loss to reach its process: it finds the
    session gone while the scripts hold new terms back, and says the server lost its data (not only
    that a term was lost). A refusal of the same process during that hold-back says nothing more;
    another process that runs into it warns once itself."""
    holder_process = RedisBackend({"url": own_redis.url}, timeout=2)
    other_process = RedisBackend({"url": own_redis.url}, timeout=2)
    try:
        holder = hold(holder_process, "job")
        lose(own_redis)
        caplog.set_level(logging.WARNING, LOGGER)
        with pytest.raises(SessionExpired):
            once_reachable(lambda: holder_process.keep_alive(holder.session_id, LEASE))
        found = warnings_of(caplog)
        assert len(found) == 1, found
        assert "no new term of any name is granted there" in found[0]  # what is held back, how long
        assert f"the keep-alive of session {holder.session_id} found it gone" in found[0]
        again = holder_process.open_session(LEASE, "holder again").session_id
        assert holder_process.acquire(again, "job") is None  # held back, and noticed already
        assert len(warnings_of(caplog)) == 1
        other = other_process.open_session(LEASE, "another process").session_id
        assert other_process.acquire(other, "job") is None
        found = warnings_of(caplog)
        assert len(found) == 2 and "a new term was refused" in found[1], found
    finally:
        holder_process.close()
        other_process.close()


def test_tokens_go_on_from_the_clock_across_every_loss(
    own_redis: RedisProcess, backend: RedisBackend
) -> None:
    seen: list[int] = []
    for _ in range(3):
        seen += tokens_of(backend, "counted")
        own_redis.kill()
        own_redis.start()
        first_grant(backend, "counted")  # waits out the hold-back
        seen += tokens_of(backend, "counted")
    assert seen == sorted(set(seen)), seen
    first = seen[0]
    assert abs(first / 1e6 - time.time()) < 3600  # microseconds of the server's clock, as documented


def test_a_flushdb_of_another_database_holds_back_nothing_here(own_redis: RedisProcess) -> None:
    here = RedisBackend({"url": own_redis.url}, timeout=2)
    there = RedisBackend({"url": own_redis.url[:-1] + "3", "check_eviction": False}, timeout=2)
    try:
        there.assume_nothing_lost()
        hold(there, "elsewhere")
        with own_redis.client(db=3) as admin:
            admin.flushdb()
        assert hold(here, "here").grant is not None  # database 0 kept its marker
        sid = there.open_session(5).session_id
        assert there.acquire(sid, "elsewhere") is None  # database 3 lost its data: held back
    finally:
        here.close()
        there.close()


def test_a_longer_lease_seen_during_the_hold_back_extends_it(
    own_redis: RedisProcess, backend: RedisBackend
) -> None:
    flushall(own_redis)
    short = backend.open_session(1.0, "short").session_id
    started = local_clock()
    assert backend.acquire(short, "x") is None  # begins a hold-back of 1 s
    long = backend.open_session(3.0, "long").session_id
    assert backend.acquire(long, "x") is None  # a 3 s lease: it lasts 3 s from its start
    grant, sent, _ = first_grant(backend, "x")
    assert sent - started >= 3.0 * (1 - DRIFT) and grant is not None


def test_a_release_during_the_hold_back_frees_the_name_instead_of_handing_it_over(
    own_redis: RedisProcess, backend: RedisBackend
) -> None:
    holder = hold(backend, "line")
    waiter = backend.open_session(LEASE, "waiter").session_id
    assert backend.store.acquire(waiter, "line", wait=True) is None  # in the line
    with own_redis.client(decode_responses=True) as admin:
        admin.delete("simba:marker")  # what an upgrade from a version without markers finds
        backend.release(holder.session_id, "line")
        assert admin.hget("simba:lease:{line}", "session") == ""  # freed, not handed to the waiter
        assert admin.zrange("simba:lease:{line}:line", 0, -1) == [waiter]  # it keeps its place
    grant, _, _ = first_grant(backend, "line")
    assert grant.token > holder.grant.token


def test_a_restart_from_an_older_snapshot_holds_back_and_tokens_go_on_above(
    backend: RedisBackend, own_redis: RedisProcess
) -> None:
    """The snapshot has the marker, left by the process that died: the new process sees it is not its own."""
    before = tokens_of(backend, "snap")
    with own_redis.client() as admin:
        admin.save()  # the snapshot: later tokens are lost with the crash
    after = tokens_of(backend, "snap")
    holder = hold(backend, "snap")
    kill_and_start(own_redis)
    with own_redis.client(decode_responses=True) as admin:
        assert admin.hget("simba:lease:{snap}", "token") == str(before[-1])  # the snapshot's, stale
    grant, sent, _ = first_grant(backend, "snap")
    assert sent >= holder.trusted_until
    assert grant.token > max(*after, holder.grant.token)


def test_a_term_an_older_snapshot_shows_held_is_over(
    backend: RedisBackend, own_redis: RedisProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """The snapshot shows the first holder holding the name: the crash lost its release, and the next term."""
    first = hold(backend, "revived")
    with own_redis.client() as admin:
        admin.save()
    backend.release(first.session_id, "revived")
    second = hold(backend, "revived")  # lost with the crash: its holder may trust it for a lease
    kill_and_start(own_redis)
    caplog.set_level(logging.WARNING, LOGGER)
    # its session is in the snapshot: it renews, but the term it held there is over
    renewal = once_reachable(lambda: backend.keep_alive(first.session_id, LEASE))
    assert isinstance(renewal, Renewal) and renewal.owned == {}  # not renewed: over
    found = warnings_of(caplog)  # and the keep-alive says why: the server lost its data
    assert len(found) == 1 and f"session {first.session_id} found the terms it held there over" in found[0]
    # not the old term again, nor a new one yet (the callers' pooled connection died with the server)
    assert once_reachable(lambda: backend.acquire(first.session_id, "revived")) is None
    grant, sent, _ = first_grant(backend, "revived")
    assert sent >= second.trusted_until and grant.token > second.grant.token


def test_with_aof_a_restart_changes_nothing() -> None:
    with redis_server("--appendonly", "yes", "--appendfsync", "always") as server:
        backend = RedisBackend({"url": server.url}, timeout=2)
        try:
            sid = backend.open_session(LEASE, "kept").session_id
            grant = backend.acquire(sid, "kept")
            assert grant is not None
            backend.release(sid, "kept")
            server.kill()  # a crash: the AOF was fsynced at every write
            server.start()
            again = once_reachable(lambda: backend.acquire(sid, "kept"))  # the session survived too
            assert isinstance(again, Grant) and again.token == grant.token + 1
        finally:
            backend.close()


def test_a_failover_to_a_replica_that_missed_writes_holds_back_and_tokens_go_on_above(
    own_redis: RedisProcess,
) -> None:
    with own_redis.client() as admin:
        admin.config_set("repl-diskless-sync-delay", 0)
    with redis_server("--replicaof", "127.0.0.1", str(own_redis.port), marked=False) as replica:
        primary = RedisBackend({"url": own_redis.url}, timeout=2)
        with own_redis.client() as client:
            client.set("simba-test:synced", 1)
            wait_until(lambda: client.wait(1, 100) == 1, 15, message="replica in sync")
        synced = tokens_of(primary, "moved")
        replica.pause()  # it misses what follows
        missed = tokens_of(primary, "moved")
        holder = hold(primary, "moved")
        own_redis.kill()
        replica.resume()
        with replica.client() as admin:
            admin.execute_command("REPLICAOF", "NO", "ONE")
        promoted = RedisBackend({"url": replica.url}, timeout=2)
        try:
            grant, sent, _ = first_grant(promoted, "moved")
            assert sent >= holder.trusted_until
            assert grant.token > max(*synced, *missed, holder.grant.token)
        finally:
            primary.close()
            promoted.close()


def test_without_info_permission_a_missing_marker_still_holds_back() -> None:
    """A user whose ACL refuses INFO: the scripts cannot tell a snapshot apart, but see a missing marker."""
    with redis_server(marked=False) as server:
        with server.client() as admin:
            everything_but_info = ["+@all", "-info"]
            admin.acl_setuser(
                "simba",
                enabled=True,
                passwords=["+pw"],
                keys=["*"],
                channels=["*"],
                commands=everything_but_info,
            )
        options = {"url": server.url, "username": "simba", "password": "pw", "check_eviction": False}
        backend = RedisBackend(options, timeout=2)
        try:
            started = local_clock()
            grant, sent, refusals = first_grant(backend, "acl")
            assert sent - started >= LEASE * (1 - DRIFT) and refusals > 10 and grant.token > 0
        finally:
            backend.close()


# -- Redis Cluster: one node loses its data alone ------------------------------------------------


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[RedisClusterProcesses]:
    with redis_cluster(masters=3) as started:
        yield started


def names_by_node(backend: RedisBackend, prefix: str, how_many: int = 60) -> dict[str, list[str]]:
    client = backend.store.scripting.client
    found: dict[str, list[str]] = {}
    for i in range(how_many):
        name = f"{prefix}.{i}"
        found.setdefault(client.get_node_from_key(f"simba:lease:{{{name}}}").name, []).append(name)
    return found


@pytest.mark.redis_cluster
@pytest.mark.parametrize("lose", ["FLUSHALL", "restart"])
def test_a_cluster_node_that_lost_its_data_holds_back_its_slots_only(
    own_cluster: RedisClusterProcesses, caplog: pytest.LogCaptureFixture, lose: str
) -> None:
    backend = RedisBackend({"startup_nodes": own_cluster.startup_nodes, "cluster": True}, timeout=3)
    try:
        by_node = names_by_node(backend, f"spread-{lose}")
        victim = own_cluster.nodes[0]
        address = f"127.0.0.1:{victim.port}"
        lost = by_node[address]
        kept = [name for node, names in by_node.items() if node != address for name in names]
        held = {name: hold(backend, name, lease=LEASE) for name in lost[:3]}
        before = {name: h.grant.token for name, h in held.items()}
        caplog.set_level(logging.WARNING, LOGGER)
        if lose == "FLUSHALL":
            flushall(victim)
        else:
            victim.kill()
            victim.start()
            wait_until(lambda: own_cluster._ready(), 30, message="the cluster whole again")
        sid = once_reachable(lambda: backend.open_session(LEASE, "contender").session_id)
        assert isinstance(sid, str)
        for name in kept[:5]:
            assert once_reachable(functools.partial(backend.acquire, sid, name)) is not None  # at once
        started = local_clock()
        assert once_reachable(lambda: backend.acquire(sid, lost[0])) is None
        # every slot of that node holds back from the same moment, not at its own first use
        assert all(backend.acquire(sid, name) is None for name in lost[3:])
        for name, holder in held.items():
            grant, sent, _ = first_grant(backend, name)
            assert sent >= holder.trusted_until and grant.token > before[name]
        assert local_clock() - started < LEASE + 2
        assert len(warnings_of(caplog)) == 1, warnings_of(caplog)
    finally:
        backend.close()


@pytest.mark.redis_cluster
def test_a_cluster_holder_notices_the_loss_at_its_keep_alive(
    own_cluster: RedisClusterProcesses, caplog: pytest.LogCaptureFixture
) -> None:
    """A node that held a term of the session loses its data: the session's keep-alive (its
    session hash gone with the node, or the term's hash slot held back) warns once, naming it."""
    backend = RedisBackend({"startup_nodes": own_cluster.startup_nodes, "cluster": True}, timeout=3)
    try:
        victim = own_cluster.nodes[0]
        address = f"127.0.0.1:{victim.port}"
        name = names_by_node(backend, "noticed")[address][0]
        sid = backend.open_session(LEASE, "holder").session_id
        wait_until(lambda: backend.acquire(sid, name) is not None, 15, message="granted (no hold-back left)")
        caplog.set_level(logging.WARNING, LOGGER)
        flushall(victim)
        try:
            renewal = once_reachable(lambda: backend.keep_alive(sid, LEASE))
            assert name not in renewal.owned
        except SessionExpired:
            pass  # the session's own hash slot was on that node
        found = warnings_of(caplog)
        assert len(found) == 1, found
        assert f"Redis Cluster node {address}" in found[0] and f"the keep-alive of session {sid}" in found[0]
    finally:
        backend.close()
