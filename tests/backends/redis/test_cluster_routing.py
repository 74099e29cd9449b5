"""Route by slot on a real Redis Cluster: only durations cross nodes, late answers give terms back."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from redis.cluster import RedisCluster

from django_simba.backends.redis import RedisBackend
from django_simba.backends.redis.cluster import ClusterStore
from django_simba.backends.redis.keys import session_groups_key, session_leases_key
from django_simba.spi import BackendTimeout, ConfigurationError
from django_simba.spi.clock import local_clock
from django_simba.testing import wait_until
from tests.servers.redis_cluster import RedisClusterProcesses

pytestmark = pytest.mark.redis_cluster


class SteppedClock:
    """The store's local clock plus an offset a test moves forward at a chosen step of a call."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return local_clock() + self.offset


def cluster_store(backend: RedisBackend, at: str, action: Callable[[], None]) -> ClusterStore:
    store = backend.store
    assert isinstance(store, ClusterStore)

    def on_step(step: str) -> None:
        if step == at:
            action()

    store.on_step = on_step
    return store


@pytest.fixture
def admin(cluster: RedisClusterProcesses) -> RedisCluster:
    return RedisCluster.from_url(cluster.url, decode_responses=True)


def test_durations_crossing_nodes_are_measured_on_the_local_clock(cluster_backend: RedisBackend) -> None:
    store = cluster_backend.store
    # the clock that counts a suspend of the host, as the nodes' clocks do (not time.monotonic)
    assert isinstance(store, ClusterStore) and store.clock is local_clock


def test_wait_replicas_is_refused_on_a_cluster(cluster: RedisClusterProcesses) -> None:
    with pytest.raises(ConfigurationError, match="not available on a Redis Cluster"):
        RedisBackend({"startup_nodes": cluster.startup_nodes, "cluster": True, "wait_replicas": 1})


def test_session_keys_share_a_slot_and_leases_hash_on_their_name(
    cluster_backend: RedisBackend, admin: RedisCluster, unique: str
) -> None:
    sid = cluster_backend.open_session(30, "slots").session_id
    assert cluster_backend.acquire(sid, unique) is not None
    cluster_backend.join(sid, unique)
    slots = {admin.keyslot(key) for key in (f"simba:session:{{{sid}}}", session_leases_key(sid))}
    slots.add(admin.keyslot(session_groups_key(sid)))
    assert slots == {admin.keyslot(sid)}
    assert admin.keyslot(f"simba:lease:{{{unique}}}") == admin.keyslot(unique)
    assert admin.ttl(f"simba:lease:{{{unique}}}") == -1  # a held hash never expires
    assert 0 < admin.pttl(session_leases_key(sid)) <= 30_000
    cluster_backend.close_session(sid)


def test_acquire_answering_late_gives_its_term_back(
    cluster_backend: RedisBackend, admin: RedisCluster, unique: str
) -> None:
    sid = cluster_backend.open_session(30, "late").session_id
    clock = SteppedClock()
    store = cluster_store(cluster_backend, "acquire:granted", lambda: setattr(clock, "offset", 31.0))
    store.clock = clock
    with pytest.raises(BackendTimeout, match="after its session's remaining time"):
        cluster_backend.acquire(sid, unique)
    assert cluster_backend.owner(unique) is None  # granted, then given back
    assert unique not in cluster_backend.keep_alive(sid, 30).owned
    late = int(admin.hget(f"simba:lease:{{{unique}}}", "token"))
    store.on_step, clock.offset = None, 0.0
    regrant = cluster_backend.acquire(sid, unique)
    assert regrant is not None and regrant.token == late + 1  # the late term was real, and is over
    cluster_backend.close_session(sid)


def test_acquire_sends_nothing_once_the_session_ran_out(
    cluster_backend: RedisBackend, admin: RedisCluster, unique: str
) -> None:
    sid = cluster_backend.open_session(30, "starved").session_id
    clock = SteppedClock()
    store = cluster_store(cluster_backend, "acquire:attempted", lambda: setattr(clock, "offset", 31.0))
    store.clock = clock
    with pytest.raises(BackendTimeout, match="nothing sent"):
        cluster_backend.acquire(sid, unique)
    assert not admin.exists(f"simba:lease:{{{unique}}}")  # no term was begun
    store.on_step, clock.offset = None, 0.0
    grant = cluster_backend.acquire(sid, unique)
    assert grant is not None
    cluster_backend.close_session(sid)


def test_join_answering_late_leaves_again(cluster_backend: RedisBackend, unique: str) -> None:
    sid = cluster_backend.open_session(30, "late-join").session_id
    clock = SteppedClock()
    store = cluster_store(cluster_backend, "join:granted", lambda: setattr(clock, "offset", 31.0))
    store.clock = clock
    with pytest.raises(BackendTimeout):
        cluster_backend.join(sid, unique)
    assert cluster_backend.members(unique) == []
    cluster_backend.close_session(sid)


def test_keep_alive_carries_remaining_minus_time_measured(cluster_backend: RedisBackend, unique: str) -> None:
    sid = cluster_backend.open_session(30, "measured").session_id
    assert cluster_backend.acquire(sid, unique) is not None
    cluster_backend.join(sid, unique)
    clock = SteppedClock()
    store = cluster_store(cluster_backend, "keep_alive:renewed", lambda: setattr(clock, "offset", 3.0))
    store.clock = clock
    # 60 s, longer than the 30 s grant: the leases are extended (a keep-alive never shortens a lease)
    sent = time.monotonic()
    renewal = cluster_backend.keep_alive(sid, 60)
    assert renewal.remaining == 60 and renewal.owned
    info = cluster_backend.owner(unique)
    session = next(s for s in cluster_backend.sessions() if s.session_id == sid)
    elapsed = time.monotonic() - sent  # what real time can have taken off, on a machine however loaded
    assert info is not None
    assert 57 - elapsed - 0.01 <= info.remaining <= 57 + 0.01  # 60 s minus the 3 s measured in between
    assert 60 - elapsed - 0.01 <= session.remaining <= 60 + 0.01
    cluster_backend.close_session(sid)


def test_grant_in_flight_during_keep_alive_is_reported_next_time(
    cluster_backend: RedisBackend, admin: RedisCluster, unique: str
) -> None:
    sid = cluster_backend.open_session(30, "in-flight").session_id
    seen: list[dict[str, int]] = []
    store = cluster_store(
        cluster_backend,
        "acquire:attempted",
        lambda: seen.append(dict(cluster_backend.keep_alive(sid, 30).owned)),
    )
    grant = cluster_backend.acquire(sid, unique)
    store.on_step = None
    assert grant is not None
    assert seen == [{}]  # the keep-alive ran between the session call and the grant
    assert admin.zscore(session_leases_key(sid), unique) is not None  # and did not drop the attempt
    info = cluster_backend.owner(unique)
    assert info is not None and info.remaining > 29  # a full lease covers that keep-alive's deadline
    assert cluster_backend.keep_alive(sid, 30).owned == {unique: grant.token}
    cluster_backend.close_session(sid)


def test_lost_lease_leaves_the_index_one_lease_after_its_attempt(
    cluster_backend: RedisBackend, admin: RedisCluster, unique: str
) -> None:
    sid = cluster_backend.open_session(1, "short").session_id
    assert cluster_backend.acquire(sid, unique) is not None
    attempted = time.monotonic()
    assert cluster_backend.force_release(unique)
    assert cluster_backend.keep_alive(sid, 1).owned == {}
    assert admin.zscore(session_leases_key(sid), unique) is not None  # a grant could still be in flight

    def dropped() -> bool:
        cluster_backend.keep_alive(sid, 1)
        return admin.zscore(session_leases_key(sid), unique) is None

    wait_until(dropped, 5, interval=0.1, message="stale index entry dropped")
    assert time.monotonic() - attempted >= 1
    cluster_backend.close_session(sid)


def test_close_repeated_after_a_failure_finishes_the_job(
    cluster: RedisClusterProcesses, admin: RedisCluster, unique: str
) -> None:
    backend = RedisBackend({"startup_nodes": cluster.startup_nodes, "cluster": True}, timeout=0.5)
    sid = backend.open_session(30, "closing").session_id
    session_node = admin.get_node_from_key(f"simba:session:{{{sid}}}").port
    name = next(
        f"{unique}.{i}" for i in range(100) if admin.get_node_from_key(f"{unique}.{i}").port != session_node
    )
    assert backend.acquire(sid, name) is not None
    backend.join(sid, name)
    lease_node = next(node for node in cluster.nodes if node.port == admin.get_node_from_key(name).port)
    lease_node.pause()  # the session call succeeds, freeing the lease does not
    try:
        with pytest.raises(BackendTimeout):
            backend.close_session(sid)
    finally:
        lease_node.resume()
    assert admin.exists(f"simba:session:{{{sid}}}") == 0  # the session went first
    assert admin.exists(session_leases_key(sid)) == 1  # its indexes remember what is left
    backend.close()
    backend = RedisBackend({"startup_nodes": cluster.startup_nodes, "cluster": True}, timeout=5)
    backend.close_session(sid)
    assert backend.owner(name) is None
    assert backend.members(name) == []
    assert admin.exists(session_leases_key(sid), session_groups_key(sid)) == 0
    backend.close()
