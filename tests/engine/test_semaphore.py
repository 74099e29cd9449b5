"""Semaphores on the in-memory backend: real threads where waiting matters, a virtual clock for bounds."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import (
    MAX_PERMITS,
    AsyncSemaphore,
    EndReason,
    Engine,
    EngineClosed,
    LeaseLost,
    LockHeld,
    Semaphore,
    Term,
)
from django_simba.engine.semaphore import permit_names
from django_simba.engine.waiters import ThreadWaiter
from django_simba.spi import InvalidName, LeaseNotHeld, LockTimeout, Notification, NotificationKind
from django_simba.testing import SemaphoreTCK, wait_until

from .conftest import LEASE, RENEW, FaultyRuntime
from .forking import run_in_child
from .virtual import Shared

PERMITS = ("jobs:1", "jobs:2", "jobs:3")


def hold_elsewhere(backend: MemoryBackend, *names: str) -> str:
    """Another process's session holding ``names``."""
    other = backend.open_session(30, "another process").session_id
    for name in names:
        assert backend.acquire(other, name) is not None
    return other


def in_line(engine: Engine, name: str) -> int:
    with engine.mutex:
        slot = engine.lines.slots.get(name)
        return len(slot.waiting) if slot is not None else 0


def lines_hold(engine: Engine, waiters: int) -> bool:
    """Every permit's line here has ``waiters`` claims."""
    return all(in_line(engine, name) == waiters for name in PERMITS)


class Taker:
    """A thread that acquires ``semaphore`` and keeps the permit until told to release it."""

    def __init__(self, semaphore: Semaphore, timeout: float | None = 10) -> None:
        self.term: Term | None = None
        self.error: BaseException | None = None
        self.release = threading.Event()
        self.released = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(semaphore, timeout), daemon=True)
        self._thread.start()

    def _run(self, semaphore: Semaphore, timeout: float | None) -> None:
        try:
            self.term = semaphore.acquire(timeout)
            self.release.wait(30)
            semaphore.release()
        except BaseException as error:  # reported to the test
            self.error = error
        finally:
            self.released.set()

    def join(self) -> None:
        self.release.set()
        self._thread.join(10)
        assert not self._thread.is_alive()


# -- names and counts ------------------------------------------------------------------------


def test_permits_are_leases_named_after_the_semaphore():
    assert permit_names("jobs", 3) == PERMITS
    assert permit_names("j", MAX_PERMITS)[-1] == f"j:{MAX_PERMITS}"


@pytest.mark.parametrize("permits", [0, -1, MAX_PERMITS + 1])
def test_a_count_out_of_range_is_refused(threaded_engine: Engine, permits: int):
    with pytest.raises(ValueError, match=f"permits must be from 1 to {MAX_PERMITS}"):
        threaded_engine.semaphore("jobs", permits)
    assert not threaded_engine.started


@pytest.mark.parametrize("permits", [True, 2.0, "3", None])
def test_a_count_that_is_not_an_int_is_refused(threaded_engine: Engine, permits: object):
    with pytest.raises(TypeError, match="permits must be an int"):
        threaded_engine.semaphore("jobs", permits)  # type: ignore[arg-type]


def test_a_name_must_leave_room_for_the_permit_suffix(threaded_engine: Engine):
    fits = "n" * (128 - len(":10"))
    assert threaded_engine.semaphore(fits, 10).permit_names[-1] == f"{fits}:10"
    with pytest.raises(InvalidName, match="at most 125 characters") as raised:
        threaded_engine.semaphore(fits + "n", 10)
    assert raised.value.name == fits + "n"
    with pytest.raises(InvalidName):
        threaded_engine.semaphore("no spaces", 3)
    assert not threaded_engine.started


# -- holding ---------------------------------------------------------------------------------


def test_a_holder_gets_a_permit_of_its_own(threaded_engine: Engine):
    semaphore = threaded_engine.semaphore("jobs", 3, timeout=5)
    with semaphore as term:
        assert term.name in PERMITS and term.token == 1 and term.is_valid()
        assert semaphore.term is term and semaphore.locked()
        assert [info.name for info in semaphore.holders()] == [term.name]
        assert threaded_engine.owner(term.name).session_id == threaded_engine.session_id
    assert term.ended is EndReason.RELEASED and semaphore.term is None
    assert semaphore.holders() == []


def test_holders_come_in_permit_order_and_only_permits(threaded_engine: Engine):
    hold_elsewhere(threaded_engine.backend, "jobs:10", "jobs:2", "jobs:other", "jobs:13")
    seen = threaded_engine.semaphore("jobs", 12).holders()
    assert [info.name for info in seen] == ["jobs:2", "jobs:10"]  # not jobs:other, nor a 13th permit


def test_at_most_n_holders_and_the_next_is_refused(threaded_engine: Engine):
    semaphore = threaded_engine.semaphore("jobs", 3)
    takers = [Taker(semaphore) for _ in range(3)]
    wait_until(lambda: all(taker.term for taker in takers), 5, message="three holders")
    assert sorted(taker.term.name for taker in takers) == list(PERMITS)  # type: ignore[union-attr]
    assert semaphore.try_acquire() is None
    with pytest.raises(LockTimeout, match=r"semaphore 'jobs' not acquired within 200 ms"):
        semaphore.acquire(0.2)
    assert all(in_line(threaded_engine, name) == 0 for name in PERMITS)  # every claim withdrawn
    assert len(semaphore.terms) == 3
    takers[1].join()
    term = semaphore.acquire(5)
    assert term.name == takers[1].term.name and term.token == 2  # type: ignore[union-attr]
    semaphore.release()
    for taker in takers:
        taker.join()
        assert taker.error is None


def test_threads_never_exceed_the_permits_and_each_permit_counts_its_own_tokens(threaded_engine: Engine):
    semaphore = threaded_engine.semaphore("jobs", 3, timeout=30)
    guard = threading.Lock()
    holding: list[str] = []
    most = 0
    granted: dict[str, list[int]] = defaultdict(list)

    def work() -> None:
        nonlocal most
        for _ in range(15):
            with semaphore as term:
                with guard:
                    assert term.name not in holding, f"{term.name} held twice at once"
                    holding.append(term.name)
                    most = max(most, len(holding))
                    granted[term.name].append(term.token)
                time.sleep(0.001)  # a real critical section, so that holders overlap
                with guard:
                    holding.remove(term.name)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert most == 3
    assert sum(len(tokens) for tokens in granted.values()) == 120
    for name, tokens in granted.items():
        assert tokens == sorted(set(tokens)), f"{name}: tokens {tokens} not strictly increasing"


def test_a_blocking_acquire_gets_the_first_permit_released(threaded_engine: Engine):
    backend = threaded_engine.backend
    other = hold_elsewhere(backend, *PERMITS)
    taker = Taker(threaded_engine.semaphore("jobs", 3))
    wait_until(lambda: all(in_line(threaded_engine, name) for name in PERMITS), 5, message="in every line")
    backend.release(other, "jobs:2")
    wait_until(lambda: taker.term is not None, 5, message="the released permit taken")
    assert taker.term.name == "jobs:2" and taker.term.token == 2  # type: ignore[union-attr]
    wait_until(lambda: not any(in_line(threaded_engine, name) for name in PERMITS), 5, message="lines left")
    backend.release(other, "jobs:1")
    assert backend.owner("jobs:1") is None  # nobody here wants another permit: not taken
    taker.join()
    assert taker.error is None and backend.owner("jobs:2") is None


def test_local_waiters_are_served_in_turn_and_none_keeps_two_permits(threaded_engine: Engine):
    backend = threaded_engine.backend
    other = hold_elsewhere(backend, *PERMITS)
    semaphore = threaded_engine.semaphore("jobs", 3)
    first = Taker(semaphore)
    wait_until(lambda: lines_hold(threaded_engine, 1), 5, message="the first in every line")
    second = Taker(semaphore)
    wait_until(lambda: lines_hold(threaded_engine, 2), 5, message="the second in every line")
    backend.release(other, "jobs:3")
    wait_until(lambda: first.term is not None, 5, message="the first waiter served")
    backend.release(other, "jobs:1")
    wait_until(lambda: second.term is not None, 5, message="the second waiter served")
    assert (first.term.name, second.term.name) == ("jobs:3", "jobs:1")  # type: ignore[union-attr]
    assert sorted(term.name for term in semaphore.terms) == ["jobs:1", "jobs:3"]
    first.join()
    second.join()
    assert first.error is None and second.error is None


def test_a_semaphore_is_not_reentrant_but_serves_many_threads(threaded_engine: Engine):
    semaphore = threaded_engine.semaphore("jobs", 3)
    term = semaphore.acquire(5)
    with pytest.raises(LockHeld, match="semaphores are not re-entrant"):
        semaphore.acquire(5)
    other = threaded_engine.semaphore("jobs", 3).acquire(5)  # another object: another permit
    assert other.name != term.name
    semaphore.release()
    with pytest.raises(LeaseNotHeld, match="not held by the caller"):
        semaphore.release()


def test_release_with_a_term_gives_back_that_permit_from_any_thread(threaded_engine: Engine):
    semaphore = threaded_engine.semaphore("jobs", 2)
    taken: list[Term] = []
    thread = threading.Thread(target=lambda: taken.append(semaphore.acquire(5)))
    thread.start()
    thread.join(10)
    with pytest.raises(LeaseNotHeld):
        semaphore.release()  # this thread holds nothing
    semaphore.release(taken[0])
    assert taken[0].ended is EndReason.RELEASED and threaded_engine.owner(taken[0].name) is None
    with pytest.raises(LeaseNotHeld, match="with the term"):
        semaphore.release(taken[0])


def test_decorator_runs_under_a_permit(threaded_engine: Engine):
    semaphore = threaded_engine.semaphore("jobs", 2, timeout=5)

    @semaphore
    def job(x: int) -> tuple[int, str]:
        term = semaphore.term
        assert term is not None and term.is_valid()
        return x * 2, term.name

    doubled, name = job(21)
    assert doubled == 42 and name in ("jobs:1", "jobs:2") and semaphore.term is None


# -- terms ending ----------------------------------------------------------------------------


def test_a_maximum_hold_ends_that_holders_permit_only(threaded_engine: Engine):
    lost: list[tuple[str, EndReason]] = []
    bounded = threaded_engine.semaphore(
        "jobs", 3, max_hold=0.2, on_lost=lambda term, reason: lost.append((term.name, reason))
    )
    unbounded = threaded_engine.semaphore("jobs", 3)
    kept = unbounded.acquire(5)
    term = bounded.acquire(5)
    wait_until(lambda: not term.is_valid(), 5, message="the maximum hold time")
    assert term.ended is EndReason.MAX_HOLD and kept.is_valid()
    wait_until(lambda: threaded_engine.owner(term.name) is None, 5, message="its permit freed")
    wait_until(lambda: lost == [(term.name, EndReason.MAX_HOLD)], 5, message="on_lost called")
    with pytest.raises(LeaseLost) as raised:
        bounded.release()
    assert raised.value.reason is EndReason.MAX_HOLD and raised.value.term is term
    unbounded.release()


def test_a_permit_force_released_is_reported_lost(threaded_engine: Engine):
    lost: list[EndReason] = []
    semaphore = threaded_engine.semaphore("jobs", 2, on_lost=lambda term, reason: lost.append(reason))
    term = semaphore.acquire(5)
    assert threaded_engine.backend.force_release(term.name)
    with pytest.raises(LeaseLost) as raised:
        semaphore.release()
    assert raised.value.reason is EndReason.TAKEN
    wait_until(lambda: lost == [EndReason.TAKEN], 5, message="on_lost called")


def test_close_wakes_every_waiter_with_engine_closed(threaded_engine: Engine):
    hold_elsewhere(threaded_engine.backend, *PERMITS)
    takers = [Taker(threaded_engine.semaphore("jobs", 3), timeout=None) for _ in range(2)]
    wait_until(lambda: lines_hold(threaded_engine, 2), 5, message="in line")
    threaded_engine.close()
    for taker in takers:
        assert taker.released.wait(5)
        assert isinstance(taker.error, EngineClosed) and "semaphore 'jobs'" in str(taker.error)


def test_an_interrupted_wait_leaves_every_line(threaded_engine: Engine, monkeypatch: pytest.MonkeyPatch):
    backend = threaded_engine.backend
    other = hold_elsewhere(backend, *PERMITS)

    def interrupted(self: object, timeout: float | None) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("django_simba.engine.waiters.ThreadWaiter.wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        threaded_engine.semaphore("jobs", 3).acquire(10)
    assert not any(in_line(threaded_engine, name) for name in PERMITS)
    backend.release(other, "jobs:1")
    assert threaded_engine.semaphore("jobs", 3).acquire(0).name == "jobs:1"  # nobody took it meanwhile


def test_in_a_forked_child_the_parents_permit_is_over_and_the_child_takes_its_own(threaded_engine: Engine):
    semaphore = threaded_engine.semaphore("jobs", 2)
    held = semaphore.acquire(5)

    def child() -> str:
        try:
            semaphore.release()
        except LeaseLost as lost:
            ended = lost.reason.value
        term = semaphore.acquire(5)
        return f"{ended}|{term.session_id != held.session_id}|{term.is_valid()}"

    assert run_in_child(child) == "forked|True|True"
    assert held.is_valid() and semaphore.term is held  # the parent's permit is untouched
    semaphore.release()


# -- offers to an acquisition that has its permit ---------------------------------------------


def test_a_permit_handed_to_a_session_whose_waiter_was_served_is_passed_on(handing_engine: Engine):
    engine = handing_engine
    backend = engine.backend
    released: list[tuple[str, int | None]] = []
    backend.release = lambda session_id, name, token=None: released.append((name, token))  # type: ignore[method-assign]
    semaphore = engine.semaphore("jobs", 3)
    request = semaphore._request(engine, waits=True, waiter=ThreadWaiter())
    with engine.mutex:  # in every line, as a refused waiter is on such a backend
        for claim in request.claims:
            claim.entered = True
            engine.lines.slot(claim.name).waiting.append(claim)
    session = engine.wait_for_session(5)
    with engine.mutex:  # both arrive before the waiter can leave the other lines
        engine._on_notification(Notification(NotificationKind.HANDED_OVER, "jobs:1", session, 7))
        engine._on_notification(Notification(NotificationKind.HANDED_OVER, "jobs:2", session, 8))
        assert request.term is not None and (request.term.name, request.term.token) == ("jobs:1", 7)
        assert engine.lines.slots["jobs:2"].term is None  # declined: never held here
    wait_until(lambda: released == [("jobs:2", 8)], 5, message="the second permit passed on")
    semaphore._give_up(engine, request)
    assert in_line(engine, "jobs:3") == 0


# -- bounds on a virtual clock -----------------------------------------------------------------


def test_a_crashed_holders_permit_is_taken_within_lease_and_a_retry(backend: MemoryBackend, make_engine):
    holder_net, waiter_net = FaultyRuntime(seed=6, timeout=RENEW), FaultyRuntime(seed=7, timeout=RENEW)
    clock = Shared(holder_net, waiter_net)
    backend._clock = clock.now
    holder, waiter = make_engine(holder_net).start(), make_engine(waiter_net).start()
    clock.run_until_true(lambda: holder.session_id is not None and waiter.session_id is not None, 5)
    held = [holder.semaphore("jobs", 2).acquire(0) for _ in range(2)]  # one object per holder
    semaphore = waiter.semaphore("jobs", 2)
    request = semaphore._request(waiter, waits=True)
    assert semaphore._first_attempts(waiter, request, 0) is None  # both refused: in line
    assert request.term is None
    seen: list[bool] = []

    def served() -> bool:
        if request.term is not None and not seen:
            seen.append(any(term.is_valid() for term in held))
        return request.term is not None

    holder_net.cut = True  # the holder's process is gone: its session expires on the backend
    took = clock.run_until_true(served, LEASE + RENEW)
    assert took <= LEASE + RENEW / 2 + RENEW / 4  # lease + renew/2 + jitter
    assert seen == [False], "a permit was granted while its old holder still trusted its term"
    assert request.term.token == 2  # type: ignore[union-attr]


def test_acquisitions_start_from_a_random_permit(runtime: FaultyRuntime, make_engine):
    engine = make_engine(runtime)
    semaphore = engine.semaphore("jobs", 3)
    firsts = {semaphore._request(engine, waits=True).claims[0].name for _ in range(30)}
    assert firsts == set(PERMITS)


# -- coroutines ----------------------------------------------------------------------------------


def test_waiting_tasks_hold_no_thread(threaded_engine: Engine):
    other = hold_elsewhere(threaded_engine.backend, *PERMITS)
    semaphore = AsyncSemaphore(threaded_engine, "jobs", 3)
    threaded_engine.wait_for_session(5)  # the engine's own threads are running

    async def main() -> tuple[int, list[str]]:
        threads_before = threading.active_count()
        waiters = [asyncio.create_task(semaphore.acquire(10)) for _ in range(20)]
        while not lines_hold(threaded_engine, 20):
            await asyncio.sleep(0.01)
        extra = threading.active_count() - threads_before
        for name in PERMITS:
            threaded_engine.backend.release(other, name)
        done, pending = await asyncio.wait(waiters, timeout=5, return_when=asyncio.FIRST_COMPLETED)
        while len(done) < 3:
            more, pending = await asyncio.wait(pending, timeout=5, return_when=asyncio.FIRST_COMPLETED)
            done |= more
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        return extra, sorted(task.result().name for task in done)

    extra, names = asyncio.run(main())
    assert extra <= 0, f"{extra} threads started for 20 waiting tasks"
    assert names == list(PERMITS)
    wait_until(lambda: not any(in_line(threaded_engine, name) for name in PERMITS), 5, message="lines left")


def test_async_with_and_release_of_the_tasks_own_permit(threaded_engine: Engine):
    semaphore = AsyncSemaphore(threaded_engine, "jobs", 2, timeout=5)

    async def hold(ready: asyncio.Event, go: asyncio.Event) -> str:
        async with semaphore as term:
            assert semaphore.term is term
            ready.set()
            await go.wait()
            return term.name

    async def main() -> tuple[list[str], Term | None, int]:
        events = [(asyncio.Event(), asyncio.Event()) for _ in range(2)]
        tasks = [asyncio.create_task(hold(ready, go)) for ready, go in events]
        for ready, _ in events:
            await ready.wait()
        refused = await semaphore.try_acquire()
        holders = len(await semaphore.holders())
        for _, go in events:
            go.set()
        return sorted(await asyncio.gather(*tasks)), refused, holders

    names, refused, holders = asyncio.run(main())
    assert names == ["jobs:1", "jobs:2"] and refused is None and holders == 2
    assert threaded_engine.backend.leases("jobs:") == []


def test_a_task_cannot_acquire_twice(threaded_engine: Engine):
    semaphore = AsyncSemaphore(threaded_engine, "jobs", 2)

    async def main() -> None:
        await semaphore.acquire(5)
        with pytest.raises(LockHeld):
            await semaphore.acquire(5)
        await semaphore.release()

    asyncio.run(main())


def test_a_cancelled_waiter_leaves_every_line(threaded_engine: Engine):
    other = hold_elsewhere(threaded_engine.backend, *PERMITS)
    semaphore = AsyncSemaphore(threaded_engine, "jobs", 3)

    async def main() -> None:
        waiter = asyncio.create_task(semaphore.acquire(10))
        while not all(in_line(threaded_engine, name) for name in PERMITS):
            await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    asyncio.run(main())
    assert not any(in_line(threaded_engine, name) for name in PERMITS)
    threaded_engine.backend.release(other, "jobs:3")
    assert threaded_engine.backend.owner("jobs:3") is None


class TestSemaphoresOnMemory(SemaphoreTCK):
    """The semaphore TCK on the in-memory backend (one process: the tests of other processes skip)."""

    @pytest.fixture
    def backend(self) -> Iterator[MemoryBackend]:
        backend = MemoryBackend(timeout=5)
        yield backend
        backend.close()
