"""Hand-over on a single node: a release gives the name to the session that has waited longest.

A session refused with ``wait=True`` joins the name's line; the release script gives the name to
the first live session of it, with the next token, and publishes who got it. The engine on the
receiving side takes the term without a round trip of its own, and leaves the line when its
waiter gives up, so that no release hands it a name nobody there wants.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.engine import Engine, EngineConfig, ThreadRuntime
from django_simba.spi import ConfigurationError, LockTimeout, Notification, NotificationKind
from django_simba.testing import wait_until

pytestmark = pytest.mark.redis


class Heard:
    """Notifications as they arrive, for conditions to wait on."""

    def __init__(self) -> None:
        self.events: list[Notification] = []
        self._lock = threading.Lock()

    def __call__(self, event: Notification) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, name: str) -> list[Notification]:
        with self._lock:
            return [event for event in self.events if event.name == name]


@pytest.fixture
def backends(shared_url: str) -> Iterator[list[RedisBackend]]:
    """Three backends, one per "process"."""
    made = [RedisBackend({"url": shared_url}, timeout=5) for _ in range(3)]
    yield made
    for backend in made:
        backend.close()


def _session(backend: RedisBackend, label: str) -> str:
    return backend.open_session(30.0, label).session_id


def _listening(backend: RedisBackend, name: str) -> Heard:
    heard = Heard()
    backend.subscribe(heard)
    wait_until(lambda: backend.notifying, 10, message="pub/sub connection")
    backend.watch_lease(name)
    return heard


def test_a_release_hands_the_name_to_the_session_that_waited_longest(backends, unique):
    holder_side, first_side, second_side = backends
    holder, first, second = (_session(b, label) for b, label in zip(backends, ["holder", "first", "second"]))
    heard = _listening(first_side, unique)
    bystander = _listening(second_side, unique)
    grant = holder_side.acquire(holder, unique)
    assert grant is not None
    assert first_side.acquire(first, unique, wait=True) is None
    assert second_side.acquire(second, unique, wait=True) is None
    assert first_side.acquire(first, unique, wait=True) is None  # trying again keeps its place

    holder_side.release(holder, unique, grant.token)
    owner = holder_side.owner(unique)
    assert owner is not None and (owner.session_id, owner.token) == (first, grant.token + 1)
    wait_until(lambda: heard.of(unique), 5, message="the hand-over's notification")
    assert heard.of(unique) == [Notification(NotificationKind.HANDED_OVER, unique, first, grant.token + 1)]
    assert second_side.acquire(second, unique, wait=True) is None  # held by the first now
    again = first_side.acquire(first, unique)
    assert again is not None and again.token == grant.token + 1  # the same term
    assert first_side.keep_alive(first, 30.0).owned[unique] == grant.token + 1  # renewed with the session

    first_side.release(first, unique, again.token)
    owner = holder_side.owner(unique)
    assert owner is not None and (owner.session_id, owner.token) == (second, grant.token + 2)
    second_side.release(second, unique, grant.token + 2)
    assert holder_side.owner(unique) is None  # the line is empty: released for all
    released = Notification(NotificationKind.RELEASED, unique)
    wait_until(lambda: released in bystander.of(unique), 5, message="the last release's notification")
    # one connection delivers in order: the hand-overs, told to the first and second sessions
    # alone, woke no one watching the name before this release for all
    handed_to_second = Notification(NotificationKind.HANDED_OVER, unique, second, grant.token + 2)
    assert bystander.of(unique) == [handed_to_second, released]


def test_sessions_that_stopped_waiting_or_died_are_passed_over(backends, unique):
    holder_side, first_side, second_side = backends
    holder, first, second = (_session(b, label) for b, label in zip(backends, ["holder", "first", "second"]))
    gone = _session(first_side, "gone")
    grant = holder_side.acquire(holder, unique)
    assert grant is not None
    for side, session in [(first_side, gone), (first_side, first), (second_side, second)]:
        assert side.acquire(session, unique, wait=True) is None
    first_side.close_session(gone)
    first_side.stop_waiting(first, unique)
    holder_side.release(holder, unique, grant.token)
    owner = holder_side.owner(unique)
    assert owner is not None and owner.session_id == second


def test_a_try_that_does_not_wait_stays_out_of_line(backends, unique):
    holder_side, other_side, _ = backends
    holder, other = _session(holder_side, "holder"), _session(other_side, "other")
    heard = _listening(other_side, unique)
    grant = holder_side.acquire(holder, unique)
    assert grant is not None
    assert other_side.acquire(other, unique) is None
    holder_side.release(holder, unique, grant.token)
    assert holder_side.owner(unique) is None
    wait_until(lambda: heard.of(unique), 5, message="the release's notification")
    assert heard.of(unique) == [Notification(NotificationKind.RELEASED, unique)]


def test_hand_over_can_be_turned_off_and_is_off_where_it_cannot_hold(shared_url, unique):
    backend = RedisBackend({"url": shared_url, "hand_over": False}, timeout=5)
    try:
        assert not backend.hands_over
        holder, waiter = _session(backend, "holder"), _session(backend, "waiter")
        grant = backend.acquire(holder, unique)
        assert grant is not None
        assert backend.acquire(waiter, unique, wait=True) is None
        backend.release(holder, unique, grant.token)
        assert backend.owner(unique) is None
    finally:
        backend.close()
    assert RedisBackend({"url": shared_url}).hands_over
    assert not RedisBackend({"url": shared_url, "wait_replicas": 1}).hands_over
    assert not RedisBackend({"url": shared_url, "cluster": True}).hands_over
    refused = [{"hand_over": "yes"}, {"hand_over": True, "cluster": True}]
    for bad in [*refused, {"hand_over": True, "wait_replicas": 1}]:
        with pytest.raises(ConfigurationError, match="hand_over"):
            RedisBackend({"url": shared_url, **bad})


# -- the engine on both ends ---------------------------------------------------------------------


def _engine(shared_url: str) -> Engine:
    backend = RedisBackend({"url": shared_url}, timeout=5)
    return Engine(backend, EngineConfig(lease_duration=10.0, renew_interval=2.0), ThreadRuntime())


@pytest.fixture
def engines(shared_url: str) -> Iterator[tuple[Engine, Engine]]:
    pair = _engine(shared_url), _engine(shared_url)
    yield pair
    for engine in pair:
        engine.close()


def _counting_acquires(engine: Engine) -> list[bool]:
    """Record the ``wait`` flag of every acquire the engine sends."""
    calls: list[bool] = []
    backend = engine.backend
    acquire = backend.acquire

    def counted(session_id: str, name: str, *, wait: bool = False):  # type: ignore[no-untyped-def]
        calls.append(wait)
        return acquire(session_id, name, wait=wait)

    backend.acquire = counted  # type: ignore[method-assign]
    return calls


def _blocked_waiter(engine: Engine, name: str) -> tuple[threading.Thread, list]:
    """A thread of ``engine`` blocked in ``lock(name).acquire()``; the term it gets lands in the list."""
    got: list = []
    thread = threading.Thread(target=lambda: got.append(engine.lock(name).acquire(10)), daemon=True)
    thread.start()
    return thread, got


def test_a_blocked_waiter_gets_the_term_from_the_release_without_asking_again(engines, unique):
    holding, waiting = engines
    calls = _counting_acquires(waiting)
    holder = holding.lock(unique)
    held = holder.acquire(5)
    thread, got = _blocked_waiter(waiting, unique)
    # refused, joining the line, then one look once its watch is set (a release before it is not missed)
    slot = waiting.lines.slot(unique)
    wait_until(lambda: len(calls) == 2 and slot.watched and slot.busy is None, 5, message="waiting")
    holder.release()
    thread.join(5)
    assert got and got[0].token == held.token + 1
    assert calls == [True, True], calls  # nothing more: the term came with the release
    assert got[0].is_valid()


def test_a_waiter_that_gives_up_leaves_the_line(engines, unique):
    holding, waiting = engines
    holder = holding.lock(unique)
    held = holder.acquire(5)
    with pytest.raises(LockTimeout):
        waiting.lock(unique).acquire(0.2)
    session = waiting.wait_for_session(5)
    line = holding.backend.store.scripting.client  # type: ignore[attr-defined]
    from django_simba.backends.redis.keys import line_key

    wait_until(lambda: line.zscore(line_key(unique), session) is None, 5, message="out of line")
    holder.release()
    assert holding.backend.owner(unique) is None  # nobody else waited: free for all
    assert held.token > 0


def test_a_term_handed_to_a_process_nobody_in_waits_is_passed_on(engines, shared_url, unique):
    holding, waiting = engines
    session = waiting.wait_for_session(5)
    holder = holding.lock(unique)
    held = holder.acquire(5)
    # The waiting process's session is in line with nobody waiting there: as when its waiter gave
    # up while the hand-over was on its way. It must hear of the term and give it back.
    with waiting.mutex:
        waiting.lines.slot(unique)
    waiting.backend.watch_lease(unique)
    assert waiting.backend.acquire(session, unique, wait=True) is None
    third = RedisBackend({"url": shared_url}, timeout=5)
    try:
        later = third.open_session(30.0, "later").session_id
        assert third.acquire(later, unique, wait=True) is None
        holder.release()
        wait_until(
            lambda: (owner := third.owner(unique)) is not None and owner.session_id == later,
            5,
            message="the term passed on to the next in line",
        )
        owner = third.owner(unique)
        assert owner is not None and owner.token == held.token + 2
    finally:
        third.close()


def test_a_hand_over_whose_notification_is_lost_still_reaches_the_waiter(engines, unique):
    holding, waiting = engines
    waiting.wait_for_session(5)  # started: its listener is subscribed, and replaced below
    deliver = waiting._on_notification

    def deaf_to_hand_overs(event: Notification) -> None:
        if event.kind is not NotificationKind.HANDED_OVER:
            deliver(event)

    assert waiting.backend._listeners == [deliver]  # type: ignore[attr-defined]
    waiting.backend._listeners = [deaf_to_hand_overs]  # type: ignore[attr-defined]
    holder = holding.lock(unique)
    held = holder.acquire(5)
    thread, got = _blocked_waiter(waiting, unique)
    slot = waiting.lines.slot(unique)
    wait_until(lambda: slot.watched and slot.busy is None and slot.waiting, 5, message="waiting in line")
    holder.release()
    thread.join(8)  # its next try (1 s) or keep-alive (2 s) finds the term its own: taken, not released
    assert got and got[0].token == held.token + 1 and got[0].is_valid()
    owner = holding.backend.owner(unique)
    assert owner is not None and owner.token == held.token + 1
