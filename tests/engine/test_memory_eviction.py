"""A session record evicted early (a Redis ``volatile-*`` eviction), on the in-memory backend."""

from __future__ import annotations

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.spi import Notification, NotificationKind, SessionExpired

from .memory_lines import LEASE, backend_on, heard, holder_and_waiter


def evicted_holder(backend: MemoryBackend) -> tuple[str, int]:
    holder = backend.open_session(LEASE, "holder").session_id
    backend.join(holder, "workers")
    grant = backend.acquire(holder, "x")
    assert grant is not None
    assert backend.evict_session(holder)
    return holder, grant.token


def test_an_evicted_session_is_gone_at_once_but_its_leases_last_their_own_time(clock):
    backend = backend_on(clock)
    seen = heard(backend)
    holder, token = evicted_holder(backend)
    joined = len(seen)  # the join was announced; what follows must not be
    assert not backend.evict_session(holder)  # gone already
    assert backend.members("workers") == []
    assert holder not in {s.session_id for s in backend.sessions()}
    for call in (lambda: backend.keep_alive(holder, LEASE), lambda: backend.acquire(holder, "y")):
        with pytest.raises(SessionExpired):
            call()
    rival = backend.open_session(3 * LEASE, "rival").session_id
    assert backend.acquire(rival, "x") is None  # the lease still holds, keep-alive or not
    info = backend.owner("x")
    assert info is not None and (info.session_id, info.token) == (holder, token)
    assert info.remaining == pytest.approx(LEASE)
    clock.now += LEASE + 0.1
    taken = backend.acquire(rival, "x")
    assert taken is not None and taken.token == token + 1
    assert seen[joined:] == []  # an eviction and an expiry say nothing


def test_the_evicted_holder_can_still_release_its_term(clock):
    backend = backend_on(clock)
    holder, token = evicted_holder(backend)
    backend.release(holder, "x", token)
    assert backend.owner("x") is None


def test_where_evictions_free_leases_the_next_keep_alive_frees_them(clock):
    backend = backend_on(clock, evictions_free_leases=True)
    seen = heard(backend)
    holder, _ = evicted_holder(backend)
    joined = len(seen)
    assert backend.owner("x") is not None
    with pytest.raises(SessionExpired):
        backend.keep_alive(holder, LEASE)
    assert backend.owner("x") is None
    assert seen[joined:] == [Notification(NotificationKind.RELEASED, "x")]


def test_an_evicted_waiter_leaves_the_line(clock):
    backend = backend_on(clock, hand_over=True)
    holder, waiter, token = holder_and_waiter(backend)
    backend.evict_session(waiter)
    assert backend.line("x") == []
    backend.release(holder, "x", token)
    assert backend.owner("x") is None
