"""The engine's side of a backend that hands names over (``LeaseBackend.hands_over``).

The in-memory backend does not hand names over; these tests tell the engine it does and feed
it what such a backend would send (a HANDED_OVER notification, a keep-alive listing a term),
to check what it makes of them. The Redis tests run the real thing end to end.
"""

from __future__ import annotations

import threading

import pytest

from django_simba.engine import CONTEND_LANE, Engine
from django_simba.engine.lock import Request
from django_simba.engine.waiters import ThreadWaiter
from django_simba.spi import BackendTimeout, LockTimeout, Notification, NotificationKind, Released, Renewal
from django_simba.testing import wait_until


@pytest.fixture
def engine(handing_engine: Engine) -> Engine:
    return handing_engine


def _waiter(engine: Engine, name: str) -> Request:
    request = Request(engine.lock(name), waits=True)
    request.waiter = ThreadWaiter()
    with engine.mutex:
        engine.lines.slot(name).waiting.append(request)
    return request


def _drain_contend_lane(engine: Engine) -> None:
    """Return once the contend lane has run every call submitted to it before."""
    done = threading.Event()
    engine.runtime.submit(CONTEND_LANE, lambda: None, lambda outcome: done.set())
    assert done.wait(5)


def _handed(engine: Engine, name: str, token: int) -> None:
    session = engine.wait_for_session(5)
    engine._on_notification(Notification(NotificationKind.HANDED_OVER, name, session, token))


def test_a_waiter_takes_the_term_handed_to_its_session(engine: Engine):
    waiter = _waiter(engine, "handed")
    _handed(engine, "handed", 9)
    assert waiter.term is not None and waiter.term.token == 9
    assert isinstance(waiter.waiter, ThreadWaiter) and waiter.waiter._event.is_set()  # woken
    with engine.mutex:
        session = engine.keeper.session
        assert session is not None
        assert waiter.term._deadline == session.deadline  # a handed term lasts as long as the session


def test_a_term_handed_to_another_session_or_an_old_one_is_not_taken(engine: Engine):
    waiter = _waiter(engine, "elsewhere")
    engine._on_notification(Notification(NotificationKind.HANDED_OVER, "elsewhere", "someone-else", 9))
    assert waiter.term is None
    with engine.mutex:
        engine.lines.slots["elsewhere"].last_token = 9  # a term this process already had
    _handed(engine, "elsewhere", 9)
    assert waiter.term is None


def test_a_late_hand_over_of_a_term_already_had_here_calls_nothing(engine: Engine):
    calls: list[str] = []
    engine.backend.release = lambda *args, **kwargs: calls.append("release")  # type: ignore[method-assign]
    engine.backend.acquire = lambda *args, **kwargs: calls.append("acquire")  # type: ignore[method-assign]
    with engine.mutex:
        slot = engine.lines.slot("had")  # nobody waits: a newer hand-over would be passed on
        slot.last_token = 9
    _handed(engine, "had", 9)  # the term last granted here, told again
    _handed(engine, "had", 8)  # an older one
    _drain_contend_lane(engine)
    assert calls == []
    with engine.mutex:
        assert slot.last_token == 9  # never lowered: an old token stays refused


def test_a_term_handed_while_an_attempt_is_on_its_way_is_left_to_that_attempt(engine: Engine):
    waiter = _waiter(engine, "busy")
    with engine.mutex:
        slot = engine.lines.slots["busy"]
        slot.busy = "acquire"
    _handed(engine, "busy", 9)
    assert waiter.term is None and slot.poked  # its reply, or the attempt right after, reports the term
    with engine.mutex:
        slot.busy = None


def test_a_term_handed_to_a_process_nobody_in_waits_is_passed_on_and_never_taken(engine: Engine):
    released: list[tuple[str, str, int | None]] = []
    engine.backend.release = lambda session_id, name, token=None: released.append((session_id, name, token))  # type: ignore[method-assign]
    with engine.mutex:
        engine.lines.slot("unwanted")  # its waiter gave up while the hand-over was on its way
    _handed(engine, "unwanted", 9)
    session = engine.wait_for_session(5)
    wait_until(lambda: released == [(session, "unwanted", 9)], 5, message="passed on")
    waiter = _waiter(engine, "unwanted")
    _handed(engine, "unwanted", 9)  # the same notification, late: that term was given back
    assert waiter.term is None


def test_a_keep_alive_listing_a_handed_term_gives_it_to_the_waiter(engine: Engine):
    waiter = _waiter(engine, "listed")
    session = engine.wait_for_session(5)
    now = engine.now()
    with engine.mutex:
        engine.lines.reconcile(session, now, Renewal(10.0, {"listed": 4}), now + 5.0)
    assert waiter.term is not None and waiter.term.token == 4  # its notification is late or lost
    assert waiter.term.session_id == session


def test_a_keep_alive_listing_a_term_nobody_here_wants_gives_it_back_for_good(engine: Engine):
    released: list[tuple[str, int | None]] = []
    engine.backend.release = lambda session_id, name, token=None: released.append((name, token))  # type: ignore[method-assign]
    session = engine.wait_for_session(5)
    now = engine.now()
    with engine.mutex:
        engine.lines.slot("stray")
        engine.lines.reconcile(session, now, Renewal(10.0, {"stray": 4}), now + 5.0)
    wait_until(lambda: released == [("stray", 4)], 5, message="given back")
    waiter = _waiter(engine, "stray")
    _handed(engine, "stray", 4)  # a hand-over notification of that term, arriving late
    assert waiter.term is None


def test_where_every_end_of_a_term_is_handed_over_a_waiter_sets_no_watch(engine: Engine):
    backend = engine.backend
    backend.hands_over_always = True  # type: ignore[misc]
    watched: list[str] = []
    backend.watch_lease = watched.append  # type: ignore[method-assign]
    other = backend.open_session(10.0, "holder").session_id
    assert backend.acquire(other, "always") is not None
    lock = engine.lock("always")
    assert lock.try_acquire() is None
    with pytest.raises(LockTimeout):
        lock.acquire(timeout=0.05)  # refused: waits for the hand-over, not for a RELEASED
    assert watched == []
    with engine.mutex:
        assert not engine.lines.slots["always"].watched


def test_a_term_whose_release_failed_is_never_granted_to_the_next_waiter(engine: Engine):
    """A's release fails unapplied; the next keep-alive still lists A's term: B must not get it.

    The fencing rule accepts a write with a token equal to the highest seen, so two local
    holders of one token would let a late write of A's land over B's.
    """
    backend = engine.backend
    first = engine.lock("relisted")
    term = first.acquire(5)
    real_release = backend.release

    def lost_release(session_id: str, name: str, token: int | None = None) -> Released:
        raise BackendTimeout("the release was lost on its way")

    backend.release = lost_release  # type: ignore[method-assign]
    first.release()
    backend.release = real_release  # type: ignore[method-assign]
    assert backend.owner("relisted") is not None  # still A's term on the backend
    waiter = _waiter(engine, "relisted")
    session = engine.wait_for_session(5)
    now = engine.now()
    with engine.mutex:
        engine.lines.reconcile(session, now, Renewal(10.0, {"relisted": term.token}), now + 5.0)
    assert waiter.term is None  # refused at the grant gate: that token was granted here before
    wait_until(lambda: backend.owner("relisted") is None, 5, message="the stale term freed")
