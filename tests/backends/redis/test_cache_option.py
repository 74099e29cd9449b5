"""``OPTIONS = {"cache": alias}``: server and credentials from django-redis, timeouts of our own."""

from __future__ import annotations

import pytest
from django_redis import get_redis_connection

from django_simba.backends.redis import RedisBackend
from django_simba.backends.redis.scripting import StandaloneScripting
from django_simba.spi import ConfigurationError

pytestmark = pytest.mark.redis


def test_backend_borrows_the_cache_server_with_its_own_timeouts(shared_url: str, unique: str) -> None:
    backend = RedisBackend({"cache": "redis"}, timeout=1.5)
    sid = backend.open_session(30, "via django-redis").session_id
    grant = backend.acquire(sid, unique)
    assert grant is not None
    scripting = backend.store.scripting
    assert isinstance(scripting, StandaloneScripting)
    ours = scripting.client.connection_pool.connection_kwargs
    theirs = get_redis_connection("redis").connection_pool.connection_kwargs
    assert (ours["host"], ours["port"], ours["db"]) == (theirs["host"], theirs["port"], theirs["db"])
    assert ours["socket_timeout"] == ours["socket_connect_timeout"] == 1.5
    assert ours["retry"].get_retries() == 0  # an acquire is never re-sent behind the caller's back
    # the cache's client sees what the backend wrote
    token = get_redis_connection("redis").hget(f"simba:lease:{{{unique}}}", "token")
    assert int(token) == grant.token
    backend.close_session(sid)
    backend.close()


def test_a_cache_that_is_not_django_redis_is_refused() -> None:
    backend = RedisBackend({"cache": "default"}, timeout=1)  # locmem
    with pytest.raises(ConfigurationError, match="not a django-redis cache"):
        backend.open_session(5)
