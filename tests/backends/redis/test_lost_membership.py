"""A membership the server lost while the session survived (a failover to a replica that missed
the join) is made again: the pub/sub reconnection that comes with such a loss asks for it."""

from __future__ import annotations

import uuid

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.backends.redis.keys import group_key
from django_simba.engine import Engine, EngineConfig
from django_simba.testing import wait_until
from tests.servers.redis_cluster import RedisProcess

pytestmark = pytest.mark.redis


def test_a_membership_the_server_lost_is_made_again_after_the_pub_sub_reconnects(own_redis: RedisProcess):
    group = f"lost.{uuid.uuid4().hex[:12]}"
    backend = RedisBackend(own_redis.backend_options(), timeout=2)
    engine = Engine(backend, EngineConfig(lease_duration=6, renew_interval=2))
    client = own_redis.client()
    try:
        # The session first: joined while it opens, the group is joined twice (the opening joins
        # every group counted), and the second join may land after the membership is taken away.
        session = engine.wait_for_session(10)
        engine.group(group).join()
        assert [m.session_id for m in engine.group(group).members()] == [session]
        wait_until(lambda: engine.backend.notifying, 10, message="pub/sub connected")
        # What a promoted replica that never saw the join holds: the session, not the membership.
        client.zrem(group_key(group), session)
        assert engine.group(group).members() == []
        client.client_kill_filter(_type="pubsub")  # a failover drops every connection to the old primary
        wait_until(lambda: [m.session_id for m in engine.group(group).members()] == [session], 10,
                   message="the membership made again")  # fmt: skip
        assert engine.session_id == session  # the same session: nothing else would have told
    finally:
        engine.close()
        client.close()
