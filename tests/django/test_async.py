"""The async API: locks, elections and groups for coroutines, without blocking the event loop."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from django.test import override_settings

import django_simba
from django_simba import LockTimeout, aelection, agroup, aleases, alock, aowner, lock, registry
from django_simba.engine import LockHeld
from django_simba.engine.lock import Request
from django_simba.engine.waiters import LoopWaiter
from tests.django.engines import fresh_engine_on, reset_engine

SIMBA = {"BACKEND": "memory", "LEASE_DURATION": 3, "RENEW_INTERVAL": 1, "METADATA": "async-tests"}


fresh_engine = fresh_engine_on(SIMBA)


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 20))


class Heartbeat:
    """Counts event-loop turns: if a call blocked the loop, the count stalls meanwhile."""

    def __init__(self) -> None:
        self.beats = 0
        self.longest_gap = 0.0

    async def run(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            self.longest_gap = max(self.longest_gap, now - last)
            last = now
            self.beats += 1


def hold_in_thread(name: str):
    """Hold ``name`` with the sync API in another thread until the returned event is set."""
    acquired, release = threading.Event(), threading.Event()
    tokens = []

    def holder():
        with lock(name, timeout=5) as term:
            tokens.append(term.token)
            acquired.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    assert acquired.wait(5)
    return release, thread, tokens


def test_public_names_are_exported_lazily():
    assert django_simba.alock is alock
    assert {"alock", "aelection", "agroup", "aowner", "aleases"} <= set(django_simba.__all__)


def test_async_with_holds_the_lock_and_releases_it():
    async def main():
        async with alock("invoices:42", timeout=5) as term:
            info = await aowner("invoices:42")
            assert info.token == term.token > 0 and info.metadata == "async-tests"
            assert [i.name for i in await aleases("invoices:")] == ["invoices:42"]
        return await aowner("invoices:42")

    assert run(main()) is None


def test_waiting_acquire_does_not_block_the_event_loop():
    release, thread, tokens = hold_in_thread("report")

    async def main():
        heartbeat = Heartbeat()
        beating = asyncio.create_task(heartbeat.run())
        waiter = asyncio.create_task(alock("report").acquire(timeout=10))
        await asyncio.sleep(0.5)  # let the waiter wait while the loop keeps beating
        assert not waiter.done()
        beats_while_waiting = heartbeat.beats
        release.set()
        term = await waiter
        beating.cancel()
        return term, beats_while_waiting, heartbeat.longest_gap

    term, beats, longest_gap = run(main())
    thread.join(5)
    assert term.token > tokens[0]
    assert beats >= 20, f"the event loop turned only {beats} times in 0.5 s"
    assert longest_gap < 0.25, f"the event loop stalled for {longest_gap:.3f} s"


def test_timeout_raises_lock_timeout_in_time():
    release, thread, _ = hold_in_thread("busy")

    async def main():
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(LockTimeout):
            await alock("busy").acquire(timeout=1.3)
        waited = loop.time() - started
        assert await alock("busy").try_acquire() is None
        return waited

    try:
        waited = run(main())
    finally:
        release.set()
        thread.join(5)
    assert 1.3 <= waited < 3


def test_a_cancelled_waiter_leaves_the_line_at_once_and_never_holds_the_name():
    release, thread, tokens = hold_in_thread("cancel-me")

    async def main():
        waiter = asyncio.create_task(alock("cancel-me").acquire(timeout=10))
        engine = registry.get_engine()
        await wait_for(lambda: _waiting(engine, "cancel-me") == 1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert _waiting(engine, "cancel-me") == 0  # out of line as it was cancelled
        release.set()
        await asyncio.to_thread(thread.join, 5)
        async with alock("cancel-me", timeout=2) as term:
            return term.token

    token = run(main())
    assert token == tokens[0] + 1  # the next term is ours: nothing was granted to the cancelled waiter


def test_a_grant_that_races_with_the_cancellation_is_given_back():
    async def main():
        lock = alock("raced")
        engine = registry.get_engine()
        request = Request(lock, waits=True, waiter=LoopWaiter(asyncio.get_running_loop()))
        await asyncio.to_thread(engine.wait_for_session, 5)
        with engine.mutex:
            engine.enqueue(request)  # granted at once: nobody holds the name
        await wait_for(lambda: request.term is not None)
        lock._abandon(engine, request)  # what a cancelled acquire does when its grant came first
        await wait_for(lambda: engine.owner("raced") is None)
        async with alock("raced", timeout=2) as term:
            return request.term.token, term.token

    given_back, next_token = run(main())
    assert next_token == given_back + 1


async def wait_for(condition, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def _waiting(engine, name: str) -> int:
    with engine.mutex:
        slot = engine.lines.slots.get(name)
        return len(slot.waiting) if slot is not None else 0


def test_lock_is_not_reentrant_within_a_task():
    async def main():
        shared = alock("once")
        async with shared:
            with pytest.raises(LockHeld):
                await shared.acquire(timeout=0)
            assert shared.locked()
        assert not shared.locked()

    run(main())


def test_tasks_sharing_one_lock_take_turns_with_new_tokens():
    async def main():
        shared = alock("turns")
        inside = 0
        overlaps = 0
        tokens = []

        async def worker():
            nonlocal inside, overlaps
            async with shared as term:
                inside += 1
                overlaps += inside > 1
                tokens.append(term.token)
                await asyncio.sleep(0.02)
                inside -= 1

        await asyncio.gather(*(worker() for _ in range(4)))
        return overlaps, tokens

    overlaps, tokens = run(main())
    assert overlaps == 0
    assert tokens == sorted(tokens) and len(set(tokens)) == 4


def test_decorator_runs_the_coroutine_under_the_lock():
    @alock("decorated", timeout=5)
    async def job(x):
        info = await aowner("decorated")
        return x, info is not None

    assert run(job(3)) == (3, True)


def test_election_with_coroutine_callbacks_runs_them_on_the_loop():
    events = []

    async def main():
        loop = asyncio.get_running_loop()

        async def on_elected(term):
            events.append(("elected", term.token, asyncio.get_running_loop() is loop))

        def on_revoked(term):
            events.append(("revoked", term.token, threading.current_thread() is not threading.main_thread()))

        async with aelection("scheduler", on_elected=on_elected, on_revoked=on_revoked) as election:
            term = await election.wait_elected(5)
            assert election.is_leader and await election.wait_decided(1)
            assert (await election.leader()).token == term.token
        deadline = loop.time() + 5
        while len(events) < 2:
            assert loop.time() < deadline, f"callbacks: {events}"
            await asyncio.sleep(0.01)
        return term.token

    token = run(main())
    assert events == [("elected", token, True), ("revoked", token, True)]


def test_second_candidate_waits_then_takes_over():
    async def main():
        first = await aelection("jobs")
        await first.wait_elected(5)
        second = await aelection("jobs")
        assert not second.is_leader
        with pytest.raises(TimeoutError):
            await second.wait_elected(0.2)
        await first.close()
        term = await second.wait_elected(5)
        await second.close()
        return term.token

    assert run(main()) == 2


def test_group_join_members_and_change_callback():
    changes = []

    async def main():
        async def on_change(members):
            changes.append(len(members))

        watcher = agroup("workers", on_change=on_change)
        async with agroup("workers") as member:
            assert member.joined and await member.is_member()
            assert len(await member.members()) == 1
            await watcher.members()  # starts watching
            deadline = asyncio.get_running_loop().time() + 5
            while 1 not in changes:
                assert asyncio.get_running_loop().time() < deadline, f"changes: {changes}"
                await asyncio.sleep(0.01)
        assert await watcher.members() == []
        await watcher.close()

    run(main())
    assert 1 in changes


@pytest.mark.django_db(transaction=True)
def test_database_backend_calls_leave_the_event_loop_thread():
    """Django refuses database I/O on a thread running an event loop; the async API never does it there."""
    with override_settings(SIMBA={**SIMBA, "BACKEND": "database"}):
        reset_engine()

        async def main():
            async with alock("db:async", timeout=5) as term:
                info = await aowner("db:async")
                members = agroup("db-workers")
                await members.join()
                listed = await members.members()
                await members.close()
                return term.token, info.token, len(listed)

        token, owner_token, members = run(main())
        reset_engine()
    assert token == owner_token > 0 and members == 1


# -- @singleton_task on coroutine functions ----------------------------------------------------------


@pytest.mark.parametrize("permits", [None, 2])
def test_waiting_singleton_task_coroutines_hold_no_thread_and_all_run(permits):
    """Twenty calls of a lock-mode coroutine task wait their turn: none holds a thread meanwhile, and the
    holder's release is not queued behind the waiters (which held the loop's executor threads, so the
    release waited for them to time out)."""
    from django_simba import singleton_task
    from django_simba.decorators import Skipped, current_term

    inside, peak = [0], [0]

    @singleton_task("async.turns", mode="lock", timeout=10, permits=permits)
    async def job():
        inside[0] += 1
        peak[0] = max(peak[0], inside[0])
        term = current_term()
        await asyncio.sleep(0.01)
        inside[0] -= 1
        return term.name, term.token  # a permit's tokens are its own

    async def main():
        await job()  # the engine starts its threads
        before = threading.active_count()
        calls = [asyncio.create_task(job()) for _ in range(20)]
        await asyncio.sleep(0.2)  # they are all waiting, or done
        waiting_threads = threading.active_count() - before
        return await asyncio.gather(*calls), waiting_threads

    tokens, waiting_threads = run(main())
    assert not [token for token in tokens if isinstance(token, Skipped)], tokens
    assert len(set(tokens)) == 20
    assert peak[0] == (permits or 1)
    assert waiting_threads == 0
    assert current_term() is None
