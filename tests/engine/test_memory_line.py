"""The in-memory backend's line: names handed to the first live waiter, as Redis and ZooKeeper do."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from django_simba.backends.memory import LineMemoryBackend, MemoryBackend
from django_simba.spi import Notification, NotificationKind, SessionExpired
from django_simba.testing import BackendTCK

from .memory_lines import LEASE, backend_on, heard, holder_and_waiter


def test_a_release_hands_the_name_to_the_first_waiter_with_the_next_token_and_tells_it_alone(clock):
    backend = backend_on(clock, hand_over=True)
    seen = heard(backend)
    holder, first, second = (backend.open_session(LEASE, n).session_id for n in ("h", "w1", "w2"))
    grant = backend.acquire(holder, "x")
    assert grant is not None
    assert backend.acquire(first, "x", wait=True) is None
    assert backend.acquire(second, "x", wait=True) is None
    assert backend.acquire(first, "x", wait=True) is None  # asking again keeps its place
    assert backend.line("x") == [first, second]
    backend.release(holder, "x", grant.token)
    assert seen == [Notification(NotificationKind.HANDED_OVER, "x", first, grant.token + 1)]
    info = backend.owner("x")
    assert info is not None and (info.session_id, info.token) == (first, grant.token + 1)
    assert backend.keep_alive(first, LEASE).owned == {"x": grant.token + 1}
    again = backend.acquire(first, "x", wait=True)  # the waiter's own attempt finds its term
    assert again is not None and again.token == grant.token + 1
    assert backend.line("x") == [second]


def test_a_refused_attempt_that_does_not_wait_stays_out_of_the_line(clock):
    backend = backend_on(clock, hand_over=True)
    holder, other = (backend.open_session(LEASE, n).session_id for n in ("h", "o"))
    grant = backend.acquire(holder, "x")
    assert grant is not None and backend.acquire(other, "x") is None
    assert backend.line("x") == []
    backend.release(holder, "x", grant.token)
    assert backend.owner("x") is None


def test_dead_waiters_are_skipped_and_an_empty_line_frees_the_name(clock):
    backend = backend_on(clock, hand_over=True)
    seen = heard(backend)
    holder = backend.open_session(LEASE, "h").session_id
    short = backend.open_session(LEASE / 2, "short").session_id
    grant = backend.acquire(holder, "x")
    assert grant is not None and backend.acquire(short, "x", wait=True) is None
    clock.now += LEASE / 2 + 1  # the waiter expired, the holder lives on
    backend.release(holder, "x", grant.token)
    assert seen == [Notification(NotificationKind.RELEASED, "x")]
    assert backend.owner("x") is None


def test_a_waiter_that_stops_waiting_is_not_handed_the_name(clock):
    backend = backend_on(clock, hand_over=True)
    holder, waiter, token = holder_and_waiter(backend)
    backend.stop_waiting(waiter, "x")
    backend.release(holder, "x", token)
    assert backend.owner("x") is None


def test_a_release_of_an_older_term_hands_nothing_over(clock):
    backend = backend_on(clock, hand_over=True)
    holder, waiter, token = holder_and_waiter(backend)
    backend.release(holder, "x", token + 5)
    info = backend.owner("x")
    assert info is not None and info.session_id == holder
    assert backend.line("x") == [waiter]


def test_on_release_only_an_expiry_or_a_close_frees_the_name_for_anyone(clock):
    backend = backend_on(clock, hand_over=True)
    holder = backend.open_session(LEASE, "h").session_id
    waiter = backend.open_session(3 * LEASE, "w").session_id
    grant = backend.acquire(holder, "x")
    assert grant is not None and backend.acquire(waiter, "x", wait=True) is None
    backend.close_session(holder)
    assert backend.owner("x") is None  # freed, as Redis frees a closed session's leases
    late = backend.open_session(LEASE, "late").session_id
    taken = backend.acquire(late, "x")  # whoever asks first, in line or not
    assert taken is not None and taken.token == grant.token + 1


def test_on_every_end_of_a_term_the_line_gets_the_name(clock):
    backend = backend_on(clock, LineMemoryBackend)
    assert backend.hands_over and backend.hands_over_always and not backend.needs_purge
    seen = heard(backend)
    a = backend.open_session(LEASE, "a").session_id
    b = backend.open_session(3 * LEASE, "b").session_id
    c = backend.open_session(3 * LEASE, "c").session_id
    grant = backend.acquire(a, "x")
    assert grant is not None
    assert backend.acquire(b, "x", wait=True) is None and backend.acquire(c, "x", wait=True) is None
    clock.now += LEASE + 1  # a expires: the server removes it by itself and passes the name on
    backend.expire_due()
    assert seen[-1] == Notification(NotificationKind.HANDED_OVER, "x", b, grant.token + 1)
    assert backend.force_release("x") is True
    assert seen[-1] == Notification(NotificationKind.HANDED_OVER, "x", c, grant.token + 2)
    backend.close_session(c)
    assert seen[-1] == Notification(NotificationKind.RELEASED, "x")
    assert backend.owner("x") is None
    with pytest.raises(SessionExpired):
        backend.keep_alive(a, LEASE)


def test_an_expired_holder_is_passed_over_by_the_next_call_before_it_looks(clock):
    backend = backend_on(clock, LineMemoryBackend)
    a = backend.open_session(LEASE, "a").session_id
    b = backend.open_session(3 * LEASE, "b").session_id
    c = backend.open_session(3 * LEASE, "c").session_id
    assert backend.acquire(a, "x") is not None
    assert backend.acquire(b, "x", wait=True) is None
    clock.now += LEASE + 1
    assert backend.acquire(c, "x") is None  # b got it first: nobody jumps the line
    info = backend.owner("x")
    assert info is not None and info.session_id == b
    assert backend.next_expiry() == pytest.approx(100.0 + 3 * LEASE)


class TestMemoryBackendsThatHandOver(BackendTCK):
    lease_duration = 0.3

    @pytest.fixture(params=["on release", "always"])
    def backend(self, request: pytest.FixtureRequest) -> Iterator[MemoryBackend]:
        on_release = request.param == "on release"
        backend = MemoryBackend(timeout=5, hand_over=True) if on_release else LineMemoryBackend(timeout=5)
        yield backend
        backend.close()
