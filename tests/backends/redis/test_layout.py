"""The key layout of the reference, as seen from a plain client; and a forked child's fresh start."""

from __future__ import annotations

import os

import pytest
import redis

from django_simba.backends.redis import RedisBackend
from django_simba.backends.redis.keys import IDLE_LEASE_MS
from django_simba.testing import wait_until

pytestmark = pytest.mark.redis


def test_keys_follow_the_reference_layout(
    shared_backend: RedisBackend, raw: redis.Redis, unique: str
) -> None:
    opened = shared_backend.open_session(20, "layout")
    sid = opened.session_id
    grant = shared_backend.acquire(sid, unique)
    shared_backend.join(sid, unique)
    assert grant is not None and len(sid) == 32

    session = raw.hgetall(f"simba:session:{{{sid}}}")
    assert set(session) == {"metadata", "expires", "lease"} and session["lease"] == "20000"
    assert 19_000 < raw.pttl(f"simba:session:{{{sid}}}") <= 20_000
    lease = raw.hgetall(f"simba:lease:{{{unique}}}")
    assert lease == {"session": sid, "token": str(grant.token), "expires": session["expires"]}
    assert raw.ttl(f"simba:lease:{{{unique}}}") == -1  # a held hash never expires
    assert raw.zrange(f"simba:session:{{{sid}}}:leases", 0, -1) == [unique]
    assert raw.zrange(f"simba:session:{{{sid}}}:groups", 0, -1) == [unique]
    assert raw.pttl(f"simba:session:{{{sid}}}:leases") > 19_000
    assert raw.zscore(f"simba:group:{{{unique}}}", sid) == float(session["expires"])

    shared_backend.release(sid, unique)
    assert raw.hget(f"simba:lease:{{{unique}}}", "session") == ""
    assert raw.hget(f"simba:lease:{{{unique}}}", "token") == str(grant.token)  # the token stays
    assert 0 < raw.pttl(f"simba:lease:{{{unique}}}") <= IDLE_LEASE_MS  # for the idle time
    # the index keeps a released name until the next keep-alive, which drops it
    assert raw.zrange(f"simba:session:{{{sid}}}:leases", 0, -1) == [unique]
    assert shared_backend.keep_alive(sid, 20).owned == {}
    assert raw.zrange(f"simba:session:{{{sid}}}:leases", 0, -1) == []

    shared_backend.close_session(sid)
    assert raw.exists(f"simba:session:{{{sid}}}", f"simba:session:{{{sid}}}:groups") == 0
    assert raw.exists(f"simba:group:{{{unique}}}") == 0


def test_foreign_session_ids_are_never_used_as_keys(shared_backend: RedisBackend, unique: str) -> None:
    from django_simba.spi import SessionExpired

    for bad in ("a}b", "x" * 65, "", "sp ace"):
        with pytest.raises(SessionExpired):
            shared_backend.acquire(bad, unique)
        shared_backend.release(bad, unique)  # no effect, no error
        shared_backend.close_session(bad)


def test_forked_child_starts_afresh_and_leaves_the_parent_alone(shared_url: str, unique: str) -> None:
    backend = RedisBackend({"url": shared_url}, timeout=5)
    backend.subscribe(lambda event: None)
    sid = backend.open_session(30, "parent").session_id
    wait_until(lambda: backend.notifying, 10, message="pub/sub connection")
    parent_subscriber = backend.subscriber.client_id
    pid = os.fork()
    if pid == 0:  # the child: never touches the parent's connections
        code = 1
        try:
            backend.after_fork()
            child = backend.open_session(30, "child").session_id
            code = 0 if child != sid and backend.acquire(child, unique) is not None else 2
            backend.close_session(child)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert backend.keep_alive(sid, 30).remaining == 30
    assert backend.notifying and backend.subscriber.client_id == parent_subscriber
    assert backend.acquire(sid, unique) is not None  # the child closed its session, freeing the name
    backend.close_session(sid)
    backend.close()
