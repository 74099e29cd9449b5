"""One lock or semaphore object shared by threads, tasks and forked children (design: Handles).

The backend-facing cases (a term ended under one caller while another is granted, a waiter's
timeout, a fork while another thread holds) are in the engine TCK, which every backend runs
(here on the memory backend: test_engine_tck_memory.py). These are the rest of the rule, on
the memory backend: what each caller sees, who may release what, and a child's holdings.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from django_simba.engine import AsyncLock, EndReason, Engine, LeaseLost, Term
from django_simba.spi import LeaseNotHeld
from django_simba.testing.sharing_tck import ForkedChild, Holder

PATIENCE = 10.0


def in_thread(fn) -> object:
    """What ``fn()`` returned (or raised) in another thread."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as error:
            result.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(PATIENCE)
    assert result, "the thread did not finish"
    return result[0]


@pytest.fixture(params=["lock", "semaphore"])
def handle(request, threaded_engine: Engine):
    """A lock, or a semaphore of two permits: their holdings are one mechanism."""
    if request.param == "lock":
        return threaded_engine.lock("shared")
    return threaded_engine.semaphore("shared", 2)


def test_what_a_caller_sees_is_its_own_term_and_terms_lists_every_callers(handle):
    holder = Holder(handle, timeout=PATIENCE)
    theirs = holder.entered(PATIENCE)
    assert handle.term is None and not handle.locked()  # this thread holds nothing
    assert handle.terms == [theirs]
    assert in_thread(lambda: handle.term) is None
    mine = handle.acquire(PATIENCE) if handle.kind == "semaphore" else None
    if mine is not None:
        assert handle.term is mine and handle.locked() and set(handle.terms) == {theirs, mine}
        handle.release()
    assert holder.leave(PATIENCE) is None
    assert handle.terms == []


def test_a_caller_that_holds_nothing_cannot_release_another_callers_term(handle):
    holder = Holder(handle, timeout=PATIENCE)
    theirs = holder.entered(PATIENCE)
    with pytest.raises(LeaseNotHeld, match="another thread or task holds it") as raised:
        handle.release()
    assert not isinstance(raised.value, LeaseLost)
    assert theirs.is_valid() and theirs.ended is None  # untouched
    handle.release(theirs)  # named by its term: given back from any thread
    assert theirs.ended is EndReason.RELEASED
    error = holder.leave(PATIENCE)  # its own release finds nothing left to give back
    assert isinstance(error, LeaseNotHeld) and not isinstance(error, LeaseLost)
    assert "not held by the caller" in str(error)


def test_release_by_term_from_two_threads_at_once_gives_it_back_once(handle):
    term = handle.acquire(PATIENCE)
    barrier = threading.Barrier(2)

    def release() -> object:
        barrier.wait(PATIENCE)
        try:
            handle.release(term)
        except LeaseNotHeld as error:
            return error
        return "released"

    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(release())) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PATIENCE)
    assert sorted(map(str, results)).count("released") == 1, results
    assert term.ended is EndReason.RELEASED and handle.terms == []


def test_a_forking_threads_own_holding_is_over_in_the_child_which_may_acquire_at_once(
    threaded_engine: Engine, handle
):
    """The forking thread survives into the child with the object as the fork left it: what it
    held there is the parent's (over here: release() says ``forked``), and it may acquire anew
    at once, on the child's session, without LockHeld."""
    held = handle.acquire(PATIENCE)

    def in_child(report) -> None:
        assert handle.term is None and handle.terms == []  # nothing of the parent's
        term = handle.acquire(PATIENCE)  # not LockHeld: the parent's holding is not this process's
        report(f"{term.session_id != held.session_id} {term.is_valid()}")
        handle.release()

    with ForkedChild(in_child) as child:
        assert child.answer(PATIENCE) == "True True"
    assert held.is_valid() and handle.term is held  # the parent's holding is untouched
    holder = threaded_engine.owner(held.name)
    assert holder is not None and holder.token == held.token
    handle.release()


def test_in_a_forked_child_releasing_the_parents_holding_says_forked_and_frees_nothing(
    threaded_engine: Engine, handle
):
    held = handle.acquire(PATIENCE)

    def in_child(report) -> None:
        try:
            handle.release()
        except LeaseLost as lost:
            report(f"{lost.reason.value} {lost.term is held}")

    with ForkedChild(in_child) as child:
        assert child.answer(PATIENCE) == "forked True"
    holder = threaded_engine.owner(held.name)
    assert held.is_valid() and holder is not None and holder.session_id == held.session_id
    handle.release()


def test_a_task_releases_only_its_own_term(threaded_engine: Engine):
    lock = AsyncLock(threaded_engine, "shared-task", timeout=PATIENCE)

    async def main() -> tuple[Term, str]:
        inside, leave = asyncio.Event(), asyncio.Event()

        async def hold() -> Term:
            async with lock as term:
                inside.set()
                await leave.wait()
            return term

        holder = asyncio.create_task(hold())
        await inside.wait()
        try:
            await lock.release()  # this task holds nothing
            refused = "released another task's term"
        except LeaseNotHeld as error:
            refused = str(error)
        leave.set()
        return await holder, refused

    term, refused = asyncio.run(main())
    assert "another thread or task holds it" in refused
    assert term.ended is EndReason.RELEASED  # by its own task's exit
