"""Locks on real threads over the in-memory backend."""

from __future__ import annotations

import threading
import time

import pytest

from django_simba.engine import EndReason, Engine, EngineClosed, LeaseLost, LockHeld
from django_simba.spi import InvalidName, LeaseNotHeld, LockTimeout
from django_simba.testing import wait_until


def test_context_manager_exposes_a_valid_term(threaded_engine: Engine):
    with threaded_engine.lock("invoices:42", timeout=5) as term:
        assert term.token > 0 and term.is_valid()
        assert threaded_engine.owner("invoices:42").session_id == threaded_engine.session_id
    assert not term.is_valid() and term.ended is EndReason.RELEASED
    assert threaded_engine.owner("invoices:42") is None


def test_try_acquire_and_timeout_when_held_elsewhere(threaded_engine: Engine):
    backend = threaded_engine.backend
    other = backend.open_session(30, "other").session_id
    backend.acquire(other, "busy")
    lock = threaded_engine.lock("busy")
    assert lock.try_acquire() is None
    started = time.monotonic()
    with pytest.raises(LockTimeout):
        lock.acquire(timeout=0.3)
    assert 0.3 <= time.monotonic() - started < 2
    backend.release(other, "busy")
    term = lock.acquire(timeout=5)
    assert term.token == 2
    lock.release()


def test_blocking_acquire_gets_the_lock_when_released(threaded_engine: Engine):
    backend = threaded_engine.backend
    other = backend.open_session(30, "other").session_id
    backend.acquire(other, "wait-for-it")
    got = []
    waiter = threading.Thread(target=lambda: got.append(threaded_engine.lock("wait-for-it").acquire(10)))
    waiter.start()
    time.sleep(0.05)  # let the waiter block (any order works; this just makes the wait real)
    backend.release(other, "wait-for-it")
    waiter.join(10)
    assert got and got[0].token == 2


def test_locks_are_not_reentrant(threaded_engine: Engine):
    lock = threaded_engine.lock("once")
    lock.acquire(5)
    with pytest.raises(LockHeld):
        lock.acquire(5)
    lock.release()
    with pytest.raises(LeaseNotHeld):
        lock.release()


def test_decorator_runs_under_the_lock(threaded_engine: Engine):
    lock = threaded_engine.lock("decorated", timeout=5)
    seen = []

    @lock
    def job(x):
        seen.append((x, lock.term.token, lock.locked()))
        return x * 2

    assert job(21) == 42
    assert seen == [(21, 1, True)] and not lock.locked()


def test_threads_of_one_process_never_hold_a_name_at_once(threaded_engine: Engine):
    inside = []
    overlaps = []
    tokens = []
    guard = threading.Lock()

    def worker():
        for _ in range(15):
            with threaded_engine.lock("shared", timeout=30) as term:
                with guard:
                    if inside:
                        overlaps.append(term.token)
                    inside.append(term.token)
                    tokens.append(term.token)
                with guard:
                    inside.remove(term.token)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not overlaps
    assert len(tokens) == 120
    assert len(set(tokens)) == 120, "two holders shared a token"


def test_one_lock_object_shared_by_threads(threaded_engine: Engine):
    lock = threaded_engine.lock("object", timeout=30)
    tokens = []

    def worker():
        for _ in range(10):
            with lock as term:
                tokens.append(term.token)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(tokens) == list(range(1, 41))


def test_max_hold_ends_the_term_as_a_loss_the_holder_sees(threaded_engine: Engine):
    lost = []
    lock = threaded_engine.lock("bounded", max_hold=0.2, on_lost=lambda t, r: lost.append(r))
    term = lock.acquire(5)
    wait_until(lambda: not term.is_valid(), 5, message="max hold release")
    assert term.ended is EndReason.MAX_HOLD
    wait_until(lambda: threaded_engine.owner("bounded") is None, 5, message="backend release")
    wait_until(lambda: lost == [EndReason.MAX_HOLD], 5, message="on_lost called")
    with pytest.raises(LeaseLost) as raised:
        lock.release()  # the holder learns its work outlived the term
    assert raised.value.reason is EndReason.MAX_HOLD and raised.value.term is term
    assert isinstance(raised.value, LeaseNotHeld)
    assert lock.term is None and lock.try_acquire() is not None


def test_a_release_that_finds_its_name_force_released_reports_the_loss(threaded_engine: Engine):
    lost = []
    lock = threaded_engine.lock("freed", on_lost=lambda term, reason: lost.append(reason))
    term = lock.acquire(5)
    assert threaded_engine.backend.force_release("freed")
    with pytest.raises(LeaseLost) as raised:
        lock.release()  # before any keep-alive noticed: the release itself learns it
    assert raised.value.reason is EndReason.TAKEN and term.ended is EndReason.TAKEN
    wait_until(lambda: lost == [EndReason.TAKEN], 5, message="on_lost called")


def test_a_with_block_that_outlives_its_max_hold_raises_at_its_end(threaded_engine: Engine):
    lock = threaded_engine.lock("bounded-block", max_hold=0.1)
    with pytest.raises(LeaseLost), lock as term:
        wait_until(lambda: not term.is_valid(), 5, message="max hold release")

    def outlive_then_fail() -> None:
        with lock as term:
            wait_until(lambda: not term.is_valid(), 5, message="max hold release")
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):  # the block's own error wins over the loss
        outlive_then_fail()


def test_lost_lease_is_reported_and_release_says_so(threaded_engine: Engine):
    lost = []
    lock = threaded_engine.lock("stolen", on_lost=lambda term, reason: lost.append(reason))
    term = lock.acquire(5)
    threaded_engine.backend.force_release("stolen")
    thief = threaded_engine.backend.open_session(30, "thief").session_id
    threaded_engine.backend.acquire(thief, "stolen")
    wait_until(lambda: lost, 5, message="lease lost callback")
    assert lost == [EndReason.TAKEN] and not term.is_valid()
    with pytest.raises(LeaseLost):
        lock.release()


def test_invalid_names_fail_before_any_io(threaded_engine: Engine):
    with pytest.raises(InvalidName):
        threaded_engine.lock("no spaces")
    with pytest.raises(InvalidName):
        threaded_engine.election("..")
    with pytest.raises(InvalidName):
        threaded_engine.group("x" * 129)
    assert not threaded_engine.started


def test_close_releases_so_others_take_over_at_once(threaded_engine: Engine):
    backend = threaded_engine.backend
    threaded_engine.lock("handover").acquire(5)
    threaded_engine.close()
    assert backend.owner("handover") is None
    other = backend.open_session(30, "other").session_id
    assert backend.acquire(other, "handover").token == 2


def _engine_on(backend) -> Engine:
    from django_simba.engine import EngineConfig, ThreadRuntime

    return Engine(backend, EngineConfig(lease_duration=2.0, renew_interval=1.0), ThreadRuntime())


def _take_in_thread(lock, timeout: float, *, then_release: bool = False) -> tuple[threading.Thread, list]:
    terms: list = []

    def take() -> None:
        terms.append(lock.acquire(timeout))
        if then_release:
            lock.release()

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread, terms


def _wanted(engine: Engine, name: str) -> bool:
    slot = engine.lines.slots.get(name)
    return slot is not None and slot.wanted_at > float("-inf")


def _blocked(engine: Engine, name: str) -> bool:
    """A thread waits for ``name`` on its own event (so the engine hands it its attempts)."""
    with engine.mutex:
        slot = engine.lines.slots.get(name)
        return slot is not None and any(
            getattr(getattr(claim, "acquisition", None), "waiter", None) is not None for claim in slot.waiting
        )


def test_a_releaser_lets_a_waiting_process_take_the_name_first(threaded_engine: Engine, monkeypatch):
    """Release then acquire at once: the waiting process gets the name before the releaser again."""
    # The courtesy is a millisecond or so; widened here so that a loaded machine cannot miss it.
    monkeypatch.setattr("django_simba.engine.pacing.NOTIFIED_COURTESY", (2, 0.5))
    first, second = threaded_engine, _engine_on(threaded_engine.backend)
    try:
        mine, theirs = first.lock("courtesy"), second.lock("courtesy")
        theirs.acquire(5)
        thread, got = _take_in_thread(mine, 5)  # refused: this process now knows the name is wanted
        wait_until(lambda: _wanted(first, "courtesy"), 5, message="refused")
        theirs.release()
        thread.join(5)
        assert got and got[0].token > 0

        thread, theirs_got = _take_in_thread(theirs, 5, then_release=True)
        wait_until(lambda: _wanted(second, "courtesy"), 5, message="waiting")
        mine.release(got[0])  # taken by the helper thread: its term says which
        again = mine.acquire(5)  # must queue behind the other process, which was waiting
        thread.join(5)
        assert theirs_got, "the waiting process never got the name"
        assert theirs_got[0].token < again.token, "the releaser took the name back before the waiter"
        mine.release()
    finally:
        second.close()


def test_a_name_nobody_else_wants_is_taken_back_at_once(threaded_engine: Engine):
    lock = threaded_engine.lock("no-courtesy")
    lock.acquire(5)
    lock.release()
    assert threaded_engine.lines.slots["no-courtesy"].courtesy_until == 0.0
    assert lock.acquire(0).token > 0  # a try: no wait was needed
    lock.release()


def test_a_blocked_caller_makes_its_later_attempts_in_its_own_thread(threaded_engine: Engine):
    backend = threaded_engine.backend
    other = _engine_on(backend)
    threads: list[tuple[str, int]] = []
    in_flight = [0]
    counting = threading.Lock()
    acquire = backend.acquire

    def recording(session_id: str, name: str, *, wait: bool = False):
        with counting:
            threads.append((session_id, threading.get_ident()))
            in_flight[0] += 1
        try:
            return acquire(session_id, name, wait=wait)
        finally:
            with counting:
                in_flight[0] -= 1

    backend.acquire = recording
    try:
        holder = other.lock("own-thread")
        holder.acquire(5)
        thread, got = _take_in_thread(threaded_engine.lock("own-thread"), 5)
        mine = threaded_engine.wait_for_session(5)
        wait_until(lambda: _wanted(threaded_engine, "own-thread"), 5, message="refused")
        # Blocked, not merely refused: until its waiter exists the engine makes attempts itself
        # (one of them may still be on its way: a loaded machine showed one from the engine's thread).
        wait_until(lambda: _blocked(threaded_engine, "own-thread"), 5, message="blocked in acquire()")
        wait_until(lambda: in_flight[0] == 0, 5, message="no attempt on its way")
        before = [ident for session_id, ident in threads if session_id == mine]
        assert thread.ident in before  # the first try, refused, in the caller's thread
        blocked_at = len(threads)
        holder.release()
        thread.join(5)
        assert got, "the waiting caller never got the lock"
        attempts = [ident for session_id, ident in threads[blocked_at:] if session_id == mine]
        assert attempts  # the one after the release
        assert set(attempts) == {thread.ident}
    finally:
        backend.acquire = acquire
        other.close()


def test_a_caller_giving_up_on_an_attempt_handed_to_it_leaves_the_next_waiter_served(threaded_engine: Engine):
    from django_simba.engine.lock import Request
    from django_simba.engine.waiters import ThreadWaiter

    session = threaded_engine.wait_for_session(5)
    lock = threaded_engine.lock("handed")
    gives_up, waits = Request(lock, waits=True), Request(lock, waits=True)
    with threaded_engine.mutex:
        slot = threaded_engine.lines.slot("handed")
        gives_up.waiter = ThreadWaiter()  # blocked in acquire(): attempts are handed to it
        slot.waiting.extend([gives_up, waits])
        threaded_engine.lines.kick(slot)
        assert gives_up.lent_session == session and slot.busy == "acquire"
        gives_up.abandoned = True  # it timed out before making the attempt
        threaded_engine.lines.withdraw(gives_up)
        assert gives_up.lent_session is None
    wait_until(lambda: waits.term is not None, 5, message="the next waiter's grant")
    assert list(slot.waiting) == []


def _recording_watches(backend) -> list[str]:
    calls: list[str] = []
    watch, unwatch = backend.watch_lease, backend.unwatch_lease
    backend.watch_lease = lambda name: (calls.append(f"watch {name}"), watch(name))[1]
    backend.unwatch_lease = lambda name: (calls.append(f"unwatch {name}"), unwatch(name))[1]
    return calls


@pytest.mark.parametrize("free", [True, False], ids=["idle watches free", "idle watches cost"])
def test_a_contended_name_stays_watched_between_waits_only_where_idle_watches_are_free(
    threaded_engine: Engine, free: bool, monkeypatch
):
    # "contended" lasts 4 renew intervals here (2 s) so that a slow machine cannot see it end early
    monkeypatch.setattr("django_simba.engine.pacing.CONTENDED_FOR", 4.0)
    backend = threaded_engine.backend
    backend.idle_watches_are_free = free
    calls = _recording_watches(backend)
    other = _engine_on(backend)
    try:
        holder = other.lock("linger")
        holder.acquire(5)
        thread, got = _take_in_thread(threaded_engine.lock("linger"), 5, then_release=True)
        wait_until(lambda: "watch linger" in calls, 5, message="the refused waiter's watch")
        holder.release()
        thread.join(5)
        assert got, "the waiter never got the name"
        slot = threaded_engine.lines.slots["linger"]
        if not free:
            unwatched = ["watch linger", "unwatch linger"]
            wait_until(lambda: calls == unwatched, 5, message="unwatched at the grant")
            return
        assert slot.watched and calls == ["watch linger"], calls  # kept: wanted elsewhere a moment ago
        # once the name has been quiet for a renew interval, a keep-alive drops the watch
        wait_until(lambda: calls == ["watch linger", "unwatch linger"], 10, message="dropped when quiet")
        assert not slot.watched and "linger" not in threaded_engine.lines._lingering
    finally:
        other.close()


def test_closing_the_engine_wakes_every_blocked_waiter(threaded_engine: Engine):
    holder = threaded_engine.lock("closing").acquire(5)
    errors: list[BaseException] = []

    def wait_forever() -> None:
        try:
            threaded_engine.lock("closing").acquire(timeout=None)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=wait_forever, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(threaded_engine.lines.slots["closing"].waiting) == 3, 5, message="all in line")
    threaded_engine.close()
    for thread in threads:
        thread.join(5)
    assert not any(thread.is_alive() for thread in threads)
    assert len(errors) == 3 and all(isinstance(error, EngineClosed) for error in errors)
    assert holder.ended is EndReason.CLOSED
    with pytest.raises(EngineClosed):
        threaded_engine.lock("closing").acquire(timeout=None)


def test_an_interrupted_blocking_acquire_leaves_the_line(threaded_engine: Engine, monkeypatch):
    """Ctrl-C in a blocked acquire: the request must not stay in line, to be granted to nobody."""
    backend = threaded_engine.backend
    other = backend.open_session(30, "other").session_id
    backend.acquire(other, "interrupted")

    def interrupted(self, timeout):
        raise KeyboardInterrupt

    monkeypatch.setattr("django_simba.engine.waiters.ThreadWaiter.wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        threaded_engine.lock("interrupted").acquire(10)
    with threaded_engine.mutex:
        assert not threaded_engine.lines.slots["interrupted"].waiting
    backend.release(other, "interrupted")
    assert threaded_engine.lock("interrupted").acquire(0).token == 2  # nobody here took it meanwhile
