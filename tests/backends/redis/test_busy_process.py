"""A busy process keeps its session on Redis (see ``tests/busy_process.py``)."""

from __future__ import annotations

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.backends.redis.scripting import StandaloneScripting
from django_simba.spi import BackendUnavailable
from tests.busy_process import run_busy_process

pytestmark = pytest.mark.redis


def test_sixteen_busy_threads_lose_no_term(shared_backend: RedisBackend) -> None:
    run = run_busy_process(shared_backend)
    print(run.summary())
    run.assert_kept()


def test_the_keep_alive_has_a_connection_of_its_own(shared_url: str, unique: str) -> None:
    """The callers hold every connection of a pool the url bounds: theirs fail, the keep-alive does not."""
    separator = "&" if "?" in shared_url else "?"
    backend = RedisBackend({"url": f"{shared_url}{separator}max_connections=1"}, timeout=5)
    try:
        session = backend.open_session(30, "own connection").session_id
        scripting = backend.store.scripting
        assert isinstance(scripting, StandaloneScripting)
        held = scripting._idle.pop()  # the pool's one connection, as a busy caller's call holds it
        try:
            with pytest.raises(BackendUnavailable, match="Too many connections"):
                backend.acquire(session, unique)
            assert backend.keep_alive(session, 30).remaining > 0
        finally:
            scripting._idle.append(held)
        backend.close_session(session)
    finally:
        backend.close()
