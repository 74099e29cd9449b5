"""What one keep-alive costs with 1 and 1,000 leases held: round trips and server commands.

Measured on servers of the tests' own, where nothing else runs: a single node answers a
keep-alive in one round trip whatever the number of leases; a cluster in one round trip to
the session's node plus one pipeline per node, written to all nodes before any reply is read.
"""

from __future__ import annotations

import pytest
import redis

from django_simba.backends.redis import RedisBackend
from tests.servers.redis_cluster import RedisClusterProcesses, RedisProcess

from .counting import counting_sends, server_counters

LEASES = (1, 1000)


def _hold(backend: RedisBackend, how_many: int, prefix: str) -> str:
    sid = backend.open_session(60, "costs").session_id
    for i in range(how_many):
        assert backend.acquire(sid, f"{prefix}.{i}") is not None
    return sid


@pytest.mark.redis
@pytest.mark.parametrize("held", LEASES)
def test_standalone_keep_alive_is_one_round_trip(
    own_redis: RedisProcess, monkeypatch: pytest.MonkeyPatch, held: int
) -> None:
    backend = RedisBackend({"url": own_redis.url}, timeout=5)
    sid = _hold(backend, held, "costs")
    backend.keep_alive(sid, 60)  # warm: connection open, scripts loaded
    with own_redis.client() as admin:
        before = server_counters([admin])
        with counting_sends(monkeypatch) as sends:
            renewal = backend.keep_alive(sid, 60)
        after = server_counters([admin])
    commands, evalsha = after[0] - before[0] - 2, after[1] - before[1]  # minus the two INFO calls
    print(f"standalone keep-alive, {held} leases: {sends.count} round trip(s), {commands} server commands")
    assert len(renewal.owned) == held
    assert sends.count == 1
    assert evalsha == 1
    # inside the one script: a few per session (the marker and INFO among them), two or three per lease
    assert commands <= 10 + 3 * held
    backend.close()


@pytest.mark.redis_cluster
@pytest.mark.parametrize("held", LEASES)
def test_cluster_keep_alive_round_trips_are_per_node_not_per_lease(
    cluster: RedisClusterProcesses, monkeypatch: pytest.MonkeyPatch, held: int
) -> None:
    backend = RedisBackend({"startup_nodes": cluster.startup_nodes, "cluster": True}, timeout=5)
    sid = _hold(backend, held, f"costs-{held}")
    backend.keep_alive(sid, 60)
    admins = [redis.Redis(host="127.0.0.1", port=node.port) for node in cluster.nodes]
    slots = {backend.store.scripting.client.keyslot(f"costs-{held}.{i}") for i in range(held)}
    nodes = {backend.store.scripting.client.get_node_from_key(f"costs-{held}.{i}").name for i in range(held)}
    before = server_counters(admins)
    with counting_sends(monkeypatch) as sends:
        renewal = backend.keep_alive(sid, 60)
    after = server_counters(admins)
    commands, evalsha = after[0] - before[0] - 2 * len(admins), after[1] - before[1]
    print(
        f"cluster keep-alive, {held} leases on {len(nodes)} node(s): {sends.count} round trip(s) "
        f"(sends), {evalsha} scripts, {commands} server commands"
    )
    assert len(renewal.owned) == held
    assert sends.count == 1 + len(nodes)  # the session's node, then one pipeline per node
    assert evalsha == 1 + len(slots)  # one script per hash slot
    for admin in admins:
        admin.close()
    backend.close_session(sid)
    backend.close()


@pytest.mark.redis
def test_standalone_acquire_and_release_are_one_round_trip_each(
    own_redis: RedisProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marker is read and kept inside the grant script: no round trip of its own."""
    backend = RedisBackend({"url": own_redis.url}, timeout=5)
    sid = backend.open_session(60, "costs").session_id
    assert backend.acquire(sid, "cycle") is not None  # warm: connection open, scripts loaded
    backend.release(sid, "cycle")
    with own_redis.client() as admin:
        before = server_counters([admin])
        with counting_sends(monkeypatch) as sends:
            for _ in range(10):
                assert backend.acquire(sid, "cycle") is not None
                backend.release(sid, "cycle")
        after = server_counters([admin])
    assert sends.count == 20
    assert after[1] - before[1] == 20  # one script each
    backend.close()


def test_a_script_call_is_packed_by_hiredis_exactly_as_redis_py_packs_it() -> None:
    """The hot path packs EVALSHA in one hiredis call: the bytes must be those redis-py would send."""
    from django_simba.backends.redis.scripting import packer_for

    connection = redis.Connection(encoding="utf-8")
    command = ("EVALSHA", "f" * 40, 2, "simba:lease:{a.b}", "simba:marker", "0123abcd", "a.b", 0, 15000, 1.5)
    pack = packer_for({"encoding": "UTF8"})
    assert pack is not None
    assert pack(command) == b"".join(connection.pack_command(*command))
    assert packer_for({"encoding": "latin-1"}) is None  # hiredis encodes as UTF-8: redis-py's packer then
    assert packer_for({"encoding_errors": "replace"}) is None
