"""Joining and leaving a name's line, and the attempts that lead to a grant, call by call.

The same virtual clock, scripted network and recording backend as ``test_term_end``: these
tests pin down which backend call a line makes when a contender joins it, leaves it, or
comes back after a loss, and from which session, where a wrong call would end in the same
grants later (or never) and no safety check would notice.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from django_simba.engine import CONTEND_LANE, Engine, EngineConfig
from django_simba.engine.alock import AsyncLock
from django_simba.engine.lock import Request
from django_simba.engine.runtime import Outcome
from django_simba.engine.semaphore import AsyncSemaphore, permit_names
from django_simba.engine.term import EndReason, Term
from django_simba.engine.waiters import LoopWaiter
from django_simba.errors import BackendTimeout, ConfigurationError, LeaseLost, LockTimeout
from django_simba.testing.runtime import Fate

from .scripted import DRIFT, LEASE, RENEW, RecordingBackend, ScriptedRuntime
from .scripted import scripted_runtime as scripted_runtime  # the module's `runtime` fixture


class LineRecordingBackend(RecordingBackend):
    """The recording backend, noting also every exit from the backend's line."""

    def stop_waiting(self, session_id: str, name: str) -> None:
        self.log.append(("stop_waiting", session_id, name, None))
        super().stop_waiting(session_id, name)


def _engine(runtime: ScriptedRuntime, backend: RecordingBackend) -> Engine:
    engine = Engine(backend, EngineConfig(lease_duration=LEASE, renew_interval=RENEW, drift=DRIFT), runtime)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 1)
    runtime.advance(0.1)
    return engine


@pytest.fixture
def backend(runtime: ScriptedRuntime) -> LineRecordingBackend:
    return LineRecordingBackend(timeout=RENEW, clock=runtime.now)


@pytest.fixture
def handing(runtime: ScriptedRuntime) -> LineRecordingBackend:
    return LineRecordingBackend(timeout=RENEW, clock=runtime.now, hand_over=True)


def _calls(backend: RecordingBackend, name: str, since: int = 0) -> list[tuple[Any, ...]]:
    return [call for call in backend.log[since:] if call[2] == name]


def _rival_holds(backend: RecordingBackend, name: str) -> tuple[str, int]:
    rival = backend.open_session(LEASE, "rival").session_id
    held = backend.acquire(rival, name)
    assert held is not None
    return rival, held.token


# -- joining a line -----------------------------------------------------------------------------


def test_a_contender_joining_a_free_line_is_decided_only_by_the_backends_answer(runtime, backend):
    engine = _engine(runtime, backend)
    election = engine.election("alpha")
    assert not election.wait_decided(0)  # nothing held here: the backend decides
    runtime.advance(0.1)
    assert election.wait_decided(0) and election.is_leader


def test_a_contender_joining_a_line_held_here_is_refused_without_asking_the_backend(runtime, backend):
    engine = _engine(runtime, backend)
    first = engine.election("beta")
    runtime.run_until_true(lambda: first.is_leader, 1)
    before = len(backend.log)
    second = engine.election("beta")
    assert second.wait_decided(0) and not second.is_leader  # told at once: the holder is here
    runtime.advance(0.1)
    assert _calls(backend, "beta", before) == []


# -- leaving a line -----------------------------------------------------------------------------


def test_a_waiter_leaving_a_handing_line_takes_its_session_out_of_the_backends_line(runtime, handing):
    engine = _engine(runtime, handing)
    rival, token = _rival_holds(handing, "delta")
    election = engine.election("delta")
    runtime.advance(0.1)
    session = engine.session_id
    assert handing.line("delta") == [session]
    before = len(handing.log)
    election.close()
    runtime.advance(0.1)
    assert _calls(handing, "delta", before) == [
        ("stop_waiting", session, "delta", None),
        ("unwatch", None, "delta", None),  # once out of the line, not before
    ]
    assert handing.line("delta") == []
    handing.release(rival, "delta", token)
    assert handing.owner("delta") is None  # handed to nobody


def test_a_waiter_leaving_a_line_that_hands_nothing_over_drops_its_watch_at_once(runtime, backend):
    engine = _engine(runtime, backend)
    _rival_holds(backend, "epsilon")
    election = engine.election("epsilon")
    runtime.advance(0.1)
    assert ("watch", None, "epsilon", None) in backend.log
    before = len(backend.log)
    election.close()
    runtime.advance(0.1)
    assert _calls(backend, "epsilon", before) == [("unwatch", None, "epsilon", None)]


def test_a_one_shot_try_refused_on_a_handing_backend_never_joined_its_line_nor_watched_it(runtime, handing):
    engine = _engine(runtime, handing)
    _rival_holds(handing, "zeta")
    before = len(handing.log)
    assert engine.lock("zeta").try_acquire() is None
    runtime.advance(0.1)
    session = engine.session_id
    assert [call[0] for call in _calls(handing, "zeta", before)] == ["acquire"]  # nobody here waits
    assert handing.line("zeta") == []
    assert _calls(handing, "zeta", before)[0] == ("acquire", session, "zeta", None)


def test_a_waiter_leaving_while_an_attempt_is_on_its_way_is_unwatched_after_its_reply(runtime, handing):
    engine = _engine(runtime, handing)
    _rival_holds(handing, "eta")
    # refused, watched, looked at once more; that second look takes a second to land
    runtime.script[CONTEND_LANE].extend([Fate(), Fate(), Fate(request_delay=1.0)])
    election = engine.election("eta")
    runtime.advance(0.5)
    with engine.mutex:
        assert engine.lines.slots["eta"].busy == "acquire"
    election.close()  # the look on its way leaves the line on its reply
    runtime.advance(1.0)
    assert [call[0] for call in _calls(handing, "eta")][-2:] == ["stop_waiting", "unwatch"]
    runtime.advance(RENEW + 0.1)  # a keep-alive goes over the quiet watches
    assert engine.session_id is not None and engine.last_error is None


# -- the attempts of a caller -------------------------------------------------------------------


class FailingBackend(LineRecordingBackend):
    """The recording backend whose next acquires of a name raise a scripted error, or run a hook."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.errors: dict[str, BaseException] = {}
        self.hooks: dict[str, Any] = {}

    def acquire(self, session_id: str, name: str, *, wait: bool = False) -> Any:
        hook = self.hooks.pop(name, None)
        if hook is not None:
            hook()
        error = self.errors.pop(name, None)
        if error is not None:
            self.log.append(("acquire", session_id, name, None))
            raise error
        return super().acquire(session_id, name, wait=wait)


@pytest.fixture
def failing(runtime: ScriptedRuntime) -> FailingBackend:
    return FailingBackend(timeout=RENEW, clock=runtime.now, hand_over=True)


def test_a_failed_first_try_raises_its_own_error(runtime, failing):
    engine = _engine(runtime, failing)
    failing.errors["theta"] = BackendTimeout("lost on its way")
    with pytest.raises(BackendTimeout):
        engine.lock("theta").acquire(0)


class PolledBackend(FailingBackend):
    """The hook-running backend without notifications: the engine polls it, as it polls SQLite."""

    notifies = False


@pytest.mark.parametrize("notifies", [False, True], ids=["polled", "notified"])
def test_a_one_shot_try_leaves_no_attempt_behind_it(runtime, notifies):
    """While a try's second permit is asked for, the first one's refusal sets off nothing (a
    poll, a watch's look) that asks the backend after the try returned None: on a loaded
    machine such a late attempt took a permit freed meanwhile, for nobody, and the next try
    was refused it (the semaphore TCK's try on SQLite)."""
    backend = (FailingBackend if notifies else PolledBackend)(timeout=RENEW, clock=runtime.now)
    engine = _engine(runtime, backend)
    permits = permit_names("pi", 2)
    rival = backend.open_session(LEASE, "rival").session_id
    for permit in permits:
        assert backend.acquire(rival, permit) is not None
        backend.hooks[permit] = lambda: runtime.advance(0.5)  # each attempt takes the caller's time
    # an attempt the engine would make on its lane (after the watch, if any) arrives late
    runtime.script[CONTEND_LANE].extend([Fate()] * notifies + [Fate(request_delay=1.0)])
    assert engine.semaphore("pi", 2).try_acquire() is None
    before = len(backend.log)
    for permit in permits:
        backend.release(rival, permit)
    runtime.advance(2.0)
    session = engine.session_id
    assert [call for call in backend.log[before:] if call[1] == session] == []
    with engine.mutex:
        assert not any(engine.lines.slots[permit].waiting for permit in permits)


def test_a_waiting_callers_first_try_joins_the_backends_line(runtime, failing):
    engine = _engine(runtime, failing)
    _rival_holds(failing, "iota")
    lock = engine.lock("iota")
    request = lock._request(engine, waits=True)
    assert lock._first_attempts(engine, request, None) is None
    assert failing.line("iota") == [engine.session_id]  # asked with wait=True
    handed = Request(engine.lock("iota-2"), waits=True)
    _rival_holds(failing, "iota-2")
    assert engine.make_lent_attempt(handed, engine.session_id) is None
    assert failing.line("iota-2") == [engine.session_id]
    lock._give_up(engine, request)


def test_after_a_failed_try_a_waiting_semaphore_puts_every_permit_not_tried_in_line(runtime, failing):
    engine = _engine(runtime, failing)
    semaphore = engine.semaphore("kappa", 4)
    request = semaphore._request(engine, waits=True)
    first, *others = request.claims
    failing.errors[first.name] = BackendTimeout("lost on its way")
    error = semaphore._first_attempts(engine, request, None)
    assert isinstance(error, BackendTimeout)
    assert all(claim.in_line for claim in request.claims)
    with engine.mutex:
        assert [list(engine.lines.slots[claim.name].waiting) for claim in others] == [
            [claim] for claim in others
        ]
    runtime.advance(0.1)
    assert request.term is not None and request.holder in others  # granted from a line
    semaphore._give_up(engine, request)
    with engine.mutex:
        assert all(not engine.lines.slots[claim.name].waiting for claim in request.claims)


@pytest.mark.parametrize("waits", [True, False])
def test_after_a_hopeless_or_one_shot_try_no_other_permit_is_put_in_line(runtime, failing, waits):
    engine = _engine(runtime, failing)
    semaphore = engine.semaphore("lambda", 3)
    request = semaphore._request(engine, waits=waits)
    first, *others = request.claims
    failing.errors[first.name] = ConfigurationError("misconfigured") if waits else BackendTimeout("lost")
    semaphore._first_attempts(engine, request, None)
    with engine.mutex:
        assert all(claim.name not in engine.lines.slots for claim in others)
    assert not any(claim.entered for claim in others)


def test_a_caller_that_left_during_its_first_try_is_taken_out_of_line(runtime, failing):
    engine = _engine(runtime, failing)
    _rival_holds(failing, "mu")
    lock = engine.lock("mu")
    request = lock._request(engine, waits=True)
    failing.hooks["mu"] = lambda: setattr(request, "abandoned", True)  # its task was cancelled meanwhile
    assert lock._first_attempts(engine, request, None) is None
    assert not request.in_line
    with engine.mutex:
        assert not engine.lines.slots["mu"].waiting


def test_a_first_try_in_the_callers_thread_keeps_the_engine_from_asking_beside_it(runtime, failing):
    engine = _engine(runtime, failing)
    elections = []
    failing.hooks["nu"] = lambda: elections.append(engine.election("nu"))  # joins while the try is out
    term = engine.lock("nu").acquire(0)
    runtime.advance(0.1)
    assert [call[0] for call in _calls(failing, "nu")] == ["acquire"]  # the election waits behind it
    assert not elections[0].is_leader and term.is_valid()


def test_a_first_try_at_the_very_end_of_a_courtesy_pause_is_made_at_once(runtime, backend):
    engine = _engine(runtime, backend)
    with engine.mutex:
        engine.lines.slot("xi").courtesy_until = runtime.now()
    assert engine.lock("xi").acquire(0).token == 1  # in the caller's thread, not left to the lane
    with engine.mutex:
        engine.lines.slot("omicron").courtesy_until = runtime.now()
    election = engine.election("omicron")  # its attempt leaves on the lane at once, not after a timer
    for _ in range(20):
        if election.is_leader or not runtime.step():
            break
    assert election.is_leader


def test_a_release_put_off_behind_an_attempt_leaves_on_that_attempts_reply(runtime, backend):
    engine = _engine(runtime, backend)
    lock = engine.lock("rho")
    term = lock.acquire(0)
    with engine.mutex:
        slot = engine.lines.slots["rho"]
        slot.busy = "acquire"  # as if an attempt for the name were on its way
    lock.release()
    runtime.advance(0.1)
    assert backend.owner("rho") is not None  # put off behind the attempt
    with engine.mutex:  # the attempt's reply: refused, and nobody waits here any more
        engine.lines._on_acquired(slot, term.session_id, runtime.now(), Outcome(value=None))
    runtime.advance(0.1)
    assert backend.log[-1] == ("release", term.session_id, "rho", term.token)
    assert backend.owner("rho") is None


def test_a_caller_that_gave_up_declines_a_late_grant(runtime, failing):
    engine = _engine(runtime, failing)
    _rival_holds(failing, "sigma")
    lock = engine.lock("sigma")
    request = lock._request(engine, waits=True)
    assert lock._first_attempts(engine, request, None) is None
    assert request.in_line
    lock._give_up(engine, request)
    assert request.abandoned and not request.in_line
    late = engine.lock("sigma-2").acquire(0)
    with engine.mutex:
        assert request.on_granted(late) is False  # the engine passes it on, never to this caller
    assert request.term is None


def test_a_caller_is_told_why_it_got_nothing(runtime, backend):
    engine = _engine(runtime, backend)
    lock = engine.lock("psi")
    failed = BackendTimeout("no answer")
    cases = [
        (None, None, 1.0, LockTimeout, "lock 'psi' not acquired within 1.0 s"),
        (None, failed, 1.0, LockTimeout, "lock 'psi' not acquired within 1.0 s (last error: no answer)"),
        (failed, None, 0, BackendTimeout, "no answer"),  # a one-shot try raises its own error
        (ConfigurationError("bad"), None, 1.0, ConfigurationError, "bad"),  # hopeless: whatever the timeout
    ]
    for error, last, timeout, kind, message in cases:
        request = lock._request(engine, waits=timeout != 0)
        request.error = last  # of the engine's later attempts
        with pytest.raises(kind) as raised:
            lock._outcome(engine, request, error, timeout)
        assert type(raised.value) is kind and str(raised.value) == message


def test_a_semaphore_may_have_one_permit_and_says_what_it_is(runtime, backend):
    engine = _engine(runtime, backend)
    assert permit_names("solo", 1) == ("solo:1",)
    semaphore = engine.semaphore("omega", 3, timeout=2.5)
    assert semaphore.permits == 3 and semaphore.timeout == 2.5
    assert repr(semaphore) == "<Semaphore 'omega' permits=3 held here=0>"


def test_a_term_granted_to_a_caller_that_left_is_released_at_once(runtime, backend):
    engine = _engine(runtime, backend)
    lock = engine.lock("tau")
    request = lock._request(engine, waits=True)
    assert lock._first_attempts(engine, request, None) is None
    term = request.term
    assert term is not None  # granted in the caller's thread, which then left (interrupted)
    lock._abandon(engine, request)
    runtime.advance(0.1)
    assert term.ended is EndReason.RELEASED
    assert backend.log[-1] == ("release", term.session_id, "tau", term.token)
    assert backend.owner("tau") is None


# -- coroutines (the threaded engine: a task's attempts run on the engine's lane) ----------------


def test_an_async_semaphore_gives_back_the_permit_a_term_names_from_any_task(threaded_engine):
    semaphore = AsyncSemaphore(threaded_engine, "upsilon", 2, timeout=5, max_hold=30)  # kept with a timer

    async def main() -> Term:
        term = await asyncio.create_task(semaphore.acquire())  # held by another task
        await semaphore.release(term)  # this task holds nothing: the term says which permit
        return term

    term = asyncio.run(main())
    assert term.ended is EndReason.RELEASED
    assert threaded_engine.backend.leases("upsilon:") == []


def test_an_async_with_block_whose_term_was_lost_raises_at_its_end(threaded_engine):
    lock = AsyncLock(threaded_engine, "phi", timeout=5)

    async def main() -> Term:
        async with lock as term:
            assert threaded_engine.backend.force_release("phi")
            for _ in range(500):  # the next keep-alive (every 0.5 s) finds it gone
                if term.ended is not None:
                    break
                await asyncio.sleep(0.01)
        return term

    with pytest.raises(LeaseLost) as raised:
        asyncio.run(main())
    assert raised.value.reason is EndReason.TAKEN and raised.value.term.name == "phi"


def test_an_async_acquire_gives_up_at_its_timeout(threaded_engine):
    hold_elsewhere = threaded_engine.backend.open_session(30, "another process").session_id
    assert threaded_engine.backend.acquire(hold_elsewhere, "chi") is not None
    lock = AsyncLock(threaded_engine, "chi")
    with pytest.raises(LockTimeout):
        asyncio.run(lock.acquire(0.2))


def test_an_async_acquire_of_one_second_waits_that_second(threaded_engine):
    backend = threaded_engine.backend
    other = backend.open_session(30, "another process").session_id
    assert backend.acquire(other, "alpha-a") is not None
    lock = AsyncLock(threaded_engine, "alpha-a")

    async def main() -> Term:
        waiter = asyncio.create_task(lock.acquire(1))
        for _ in range(500):
            with threaded_engine.mutex:
                slot = threaded_engine.lines.slots.get("alpha-a")
                if slot is not None and slot.waiting and slot.busy is None:
                    break
            await asyncio.sleep(0.001)
        backend.release(other, "alpha-a")  # freed while it waits: the notification brings it in
        term = await waiter
        await lock.release(term)  # held by the waiter's task: the term says which
        return term

    assert asyncio.run(main()).name == "alpha-a"


def test_an_async_acquire_granted_at_once_wakes_its_loop_only_with_the_answer(threaded_engine, monkeypatch):
    """Its attempt's answer is the one wake-up of the loop: no waiter is made, nor woken, for a grant."""
    woken = []
    wake = LoopWaiter.wake
    monkeypatch.setattr(LoopWaiter, "wake", lambda self: (woken.append(self), wake(self)))
    lock = AsyncLock(threaded_engine, "psi", timeout=5)
    backend = threaded_engine.backend
    elsewhere = backend.open_session(30, "another process").session_id

    async def main() -> None:
        for _ in range(3):
            async with lock:
                pass
        assert woken == []
        held = backend.acquire(elsewhere, "psi")
        waiting = asyncio.create_task(lock.acquire())
        await asyncio.sleep(0.1)  # refused: it waits on a waiter of its own
        backend.release(elsewhere, "psi", held.token)
        term = await waiting  # the engine's next try gets it, and wakes that waiter
        assert len(woken) >= 1
        await lock.release(term)  # held by the other task

    asyncio.run(main())
