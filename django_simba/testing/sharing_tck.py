"""What one lock or semaphore object shared by several threads or tasks means, on a real backend.

A handle keeps who holds which term per caller (design: Handles): a caller releases only
its own term, a caller whose term ended hears of it from its own release even after the
handle was granted to another caller, whose term is left alone; a caller's timeout holds
whatever the others do; and a forked child's handles hold nothing of its parent's. Each is
checked on locks and semaphores (threads and tasks), and a term ends each way it can end
without its holder's release: its maximum hold, an operator's force release, its deadline.
:class:`~django_simba.testing.EngineTCK` includes these tests, so every backend runs them.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from ..engine import AsyncLock, AsyncSemaphore, EndReason, Engine, Lock, Semaphore, Term
from ..engine.lock import ThreadAcquirer
from ..errors import BackendTimeout, LeaseLost
from ..spi import LeaseBackend
from ..spi.clock import local_clock

#: The handles that share their holdings one way (``semaphore``: of one permit, so that the next
#: caller waits for the first caller's permit).
KINDS = ("lock", "semaphore")
#: How a caller's term ends without its own release (see :class:`Ending`).
ENDINGS = ("max_hold", "force_release", "deadline")
#: The lease of an engine whose terms must not lapse in a test (it checks another ending, or
#: none): on a loaded machine a keep-alive came later than the kit's 1 s lease allows, and the
#: term ended by its deadline before the ending under test (DEADLINE where TAKEN was checked).
STEADY_LEASE = 30.0
#: Where a term or a session must end soon in a test, the engine's lease is this many of the kit's
#: leases: soon, yet longer than a loaded machine delayed a keep-alive.
SOON = 3


class SharedHandleTCK:
    """The shared-handle tests, mixed into the engine TCK, whose fixtures (``backend``,
    ``make_engine``, ``name``) and patience they use."""

    margin: float
    lease_duration: float

    if TYPE_CHECKING:

        def patience(self) -> float: ...

    @pytest.fixture(params=KINDS)
    def kind(self, request: pytest.FixtureRequest) -> str:
        """Each kind of handle (:data:`KINDS`)."""
        return str(request.param)

    @pytest.fixture(params=ENDINGS)
    def end(
        self, request: pytest.FixtureRequest, backend: LeaseBackend, monkeypatch: pytest.MonkeyPatch
    ) -> Ending:
        """Each way a caller's term ends without its release (:data:`ENDINGS`)."""
        return Ending(request.param, backend, monkeypatch, max_hold=self.margin, lease=self.lease_duration)

    def test_a_shared_handle_whose_callers_term_ended_leaves_the_next_callers_term_alone(
        self, backend: LeaseBackend, make_engine: Callable[..., Engine], name: str, kind: str, end: Ending
    ) -> None:
        """Thread A's term ends while A is still inside its block, and the engine grants the
        handle to thread B: B gets it while A is inside, A's exit raises LeaseLost with the
        reason, and B's term stays valid and held on the backend, with no loss reported for it."""
        engine = make_engine(backend, **end.engine)
        lost = Losses()
        handle = thread_handle(engine, kind, name, on_lost=lost, **end.options)
        first = Holder(handle, timeout=self.patience())
        first_term = first.entered(self.patience())
        second = Holder(handle, timeout=self.patience() + self.margin)  # waits for A's term to end
        end.end(first_term)
        second_term = second.entered(self.patience() + self.margin)
        assert first.inside, "B was granted only once A left its block"
        assert first_term.ended is end.reason and second_term.token > first_term.token
        assert_ended_by(first.leave(self.patience()), first_term, end.reason)
        assert second_term.is_valid() and second_term.ended is None
        assert _owner(backend, second_term.name) == (second_term.session_id, second_term.token)
        assert second.leave(self.patience()) is None  # its own term, released as usual
        assert second_term.ended is EndReason.RELEASED
        assert lost.seen(engine, self.patience()) == [(first_term, end.reason)]

    def test_a_shared_async_handle_whose_tasks_term_ended_leaves_the_next_tasks_term_alone(
        self, backend: LeaseBackend, make_engine: Callable[..., Engine], name: str, kind: str, end: Ending
    ) -> None:
        """The same for two tasks sharing one ``AsyncLock`` or ``AsyncSemaphore``: task A's exit
        must not release task B's live term (it would free the name for other processes while B
        is inside its block)."""
        engine = make_engine(backend, **end.engine)
        lost = Losses()
        handle = async_handle(engine, kind, name, on_lost=lost, **end.options)
        patience = self.patience()
        seen: dict[str, Any] = {}

        async def main() -> None:
            b_inside, a_left = asyncio.Event(), asyncio.Event()

            async def first() -> None:
                try:
                    async with handle as term:
                        seen["a"] = term
                        await asyncio.to_thread(end.end, term)
                        await asyncio.wait_for(b_inside.wait(), patience + self.margin)
                except LeaseLost as error:
                    seen["a error"] = error
                finally:
                    a_left.set()

            async def second() -> None:
                while "a" not in seen:
                    await asyncio.sleep(0.005)
                async with handle as term:
                    seen["b"] = term
                    seen["a inside when b entered"] = not a_left.is_set()
                    b_inside.set()
                    await asyncio.wait_for(a_left.wait(), patience)
                    owner = await asyncio.to_thread(_owner, backend, term.name)
                    seen["b after a left"] = (term.is_valid(), term.ended, owner)

            await asyncio.wait_for(asyncio.gather(first(), second()), 3 * patience + self.margin)

        asyncio.run(main())
        first_term, second_term = seen["a"], seen["b"]
        assert seen["a inside when b entered"]
        assert_ended_by(seen.get("a error"), first_term, end.reason)
        owner = (second_term.session_id, second_term.token)
        assert seen["b after a left"] == (True, None, owner), "A's exit ended B's term"
        assert second_term.ended is EndReason.RELEASED  # by B's own exit
        assert lost.seen(engine, patience) == [(first_term, end.reason)]

    def test_a_waiter_on_a_shared_handle_returns_within_its_timeout(
        self, backend: LeaseBackend, make_engine: Callable[..., Engine], name: str, kind: str
    ) -> None:
        """Thread A holds the object and stays inside its block past its maximum hold; thread B's
        ``acquire(timeout=1)`` on the same object returns within its second, while A is inside."""
        engine = make_engine(backend)
        handle = thread_handle(engine, kind, name, max_hold=0.2)
        first = Holder(handle, timeout=self.patience())
        first.entered(self.patience())
        started = local_clock()
        second = Holder(handle, timeout=1.0)
        second_term = second.entered(1.0 + self.margin)
        took = local_clock() - started
        assert first.inside, "B's acquire returned only once A left its block"
        assert took <= 1.0 + self.margin, f"acquire(timeout=1) returned after {took:.2f} s"
        assert second_term.token > 0
        first.leave(self.patience())
        second.leave(self.patience())

    def test_a_fork_while_another_thread_holds_a_shared_handle_leaves_the_child_free_to_take_it(
        self, backend: LeaseBackend, make_engine: Callable[..., Engine], name: str, kind: str
    ) -> None:
        """A handle made before the fork (a module-level one) is held by another thread of the
        parent at ``os.fork()``. The child's own ``acquire(timeout=...)`` on it is served on the
        child's session once the parent releases; the parent's term is untouched by the child."""
        # The memory backend's copy in the child frees the parent's name once the parent's session
        # expires there, where nothing renews it: soon.
        engine = make_engine(backend, lease_duration=SOON * self.lease_duration)
        handle = thread_handle(engine, kind, name)
        holder = Holder(handle, timeout=self.patience())
        parent_term = holder.entered(self.patience())
        patience = self.patience()

        def in_child(report: Callable[[str], None]) -> None:
            report(f"tried {handle.try_acquire() is not None}")  # the parent still holds it
            term = handle.acquire(timeout=2 * patience)
            report(f"{term.token} {term.session_id} {term.is_valid()}")
            handle.release()
            engine.close(timeout=1.0)

        with ForkedChild(in_child) as child:
            assert child.answer(patience) == "tried False"  # the child runs, the handle as the fork left it
            assert parent_term.is_valid()
            assert _owner(backend, parent_term.name) == (parent_term.session_id, parent_term.token)
            assert holder.leave(patience) is None  # the parent's own term, released as usual
            token, session_id, valid = child.answer(3 * patience).split()
        assert valid == "True" and session_id != parent_term.session_id
        assert int(token) > parent_term.token


def thread_handle(engine: Engine, kind: str, name: str, **options: Any) -> Lock | Semaphore:
    """A handle for threads of ``kind`` (see :data:`KINDS`)."""
    return engine.lock(name, **options) if kind == "lock" else engine.semaphore(name, 1, **options)


def async_handle(engine: Engine, kind: str, name: str, **options: Any) -> AsyncLock | AsyncSemaphore:
    """A handle for tasks of ``kind`` (see :data:`KINDS`)."""
    return engine.alock(name, **options) if kind == "lock" else AsyncSemaphore(engine, name, 1, **options)


class Ending:
    """Ends a caller's term without its release, one of the ways of :data:`ENDINGS`.

    ``max_hold``: the handle's maximum hold time passes. ``force_release``: an operator frees
    the name on the backend (the engine hears of it at the next keep-alive, or sooner). ``deadline``:
    no call of the term's session arrives any more (a network cut for that session only), so the
    term's local deadline passes, then the session's; the engine opens another session.

    ``engine`` is how the test's engine is made: only where the ending is the deadline may a
    term lapse (:data:`SOON`); elsewhere with a lease that no term of the test outlasts.
    """

    REASONS = {
        "max_hold": EndReason.MAX_HOLD,
        "force_release": EndReason.TAKEN,
        "deadline": EndReason.DEADLINE,
    }

    def __init__(
        self,
        how: str,
        backend: LeaseBackend,
        monkeypatch: pytest.MonkeyPatch,
        *,
        max_hold: float,
        lease: float = 1.0,  # the kit's (EngineKit.lease_duration)
    ) -> None:
        self.how = how
        self.reason = self.REASONS[how]
        #: What the handle is made with for this ending.
        self.options: dict[str, Any] = {"max_hold": max_hold} if how == "max_hold" else {}
        #: What the engine is made with for this ending.
        self.engine: dict[str, Any] = {"lease_duration": SOON * lease if how == "deadline" else STEADY_LEASE}
        self._backend = backend
        self._monkeypatch = monkeypatch

    def end(self, term: Term) -> None:
        """Bring about the end of ``term`` (held by the first caller); it ends on its own later."""
        if self.how == "force_release":
            assert self._backend.force_release(term.name), "the operator found the name free"
        elif self.how == "deadline":
            for method in ("keep_alive", "acquire", "release"):
                self._monkeypatch.setattr(
                    self._backend, method, _cut_off(getattr(self._backend, method), term)
                )


def _cut_off(call: Callable[..., Any], term: Term) -> Callable[..., Any]:
    """``call`` (a backend method whose first argument is a session id), failing unapplied for the
    session of ``term``: its keep-alives and acquires never arrive, so no other term is granted
    to it before its deadline ends it too."""

    def cut(session_id: str, *args: Any, **kwargs: Any) -> Any:
        if session_id == term.session_id:
            raise BackendTimeout(f"a call of session {session_id} was lost on its way (sharing TCK)")
        return call(session_id, *args, **kwargs)

    return cut


class Holder:
    """A thread that acquires ``lock`` (or a semaphore) and stays inside its block until told to leave."""

    def __init__(self, lock: ThreadAcquirer, *, timeout: float) -> None:
        self.term: Term | None = None
        self.error: BaseException | None = None
        self.inside = False
        self._entered = threading.Event()
        self._leave = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(lock, timeout), daemon=True)
        self._thread.start()

    def _run(self, lock: ThreadAcquirer, timeout: float) -> None:
        try:
            self.term = lock.acquire(timeout)
            self.inside = True
            self._entered.set()
            self._leave.wait(600)
            self.inside = False
            lock.release()
        except BaseException as error:  # reported to the test
            self.inside = False
            self.error = error
        finally:
            self._entered.set()

    def entered(self, timeout: float) -> Term:
        """The term it holds, once it is inside its block (within ``timeout``)."""
        assert self._entered.wait(timeout), f"not granted within {timeout:g} s"
        if self.term is None:
            raise AssertionError(f"the acquire failed: {self.error!r}") from self.error
        return self.term

    def leave(self, timeout: float) -> BaseException | None:
        """Leave the block; what its exit raised (``None``: released as usual)."""
        self._leave.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"its release did not return within {timeout:g} s"
        return self.error


#: How long a forked child may take to exit once the test is done with it.
EXIT_WAIT = 5.0


class ForkedChild:
    """``os.fork()``, run ``body(report)`` in the child, and read each line it reports.

    A child that hangs is killed when the block ends, so a test never waits for it for ever.
    """

    def __init__(self, body: Callable[[Callable[[str], None]], None]) -> None:
        self._body = body
        self._buffer = b""

    def __enter__(self) -> ForkedChild:
        read, write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into the test
            os.close(read)

            def report(line: str) -> None:
                os.write(write, line.encode() + b"\n")

            try:
                self._body(report)
            except BaseException as error:  # the parent reports it
                os.write(write, f"error: {error!r}\n".encode())
            finally:
                os._exit(0)
        os.close(write)
        self._read = read
        return self

    def answer(self, timeout: float) -> str:
        """The child's next line, within ``timeout``."""
        deadline = local_clock() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - local_clock()
            ready, _, _ = select.select([self._read], [], [], max(0.0, remaining))
            assert ready, f"the forked child did not answer within {timeout:g} s"
            chunk = os.read(self._read, 4096)
            assert chunk, "the forked child exited without answering"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        text = line.decode()
        assert not text.startswith("error: "), f"in the forked child: {text}"
        return text

    def __exit__(self, *exc: object) -> None:
        os.close(self._read)
        deadline = local_clock() + EXIT_WAIT
        while os.waitpid(self.pid, os.WNOHANG)[0] == 0:
            if local_clock() >= deadline:
                os.kill(self.pid, signal.SIGKILL)  # hung (or still closing): never left behind
                os.waitpid(self.pid, 0)
                return
            time.sleep(0.01)


def _owner(backend: LeaseBackend, name: str) -> tuple[str, int] | None:
    info = backend.owner(name)
    return None if info is None else (info.session_id, info.token)


def assert_ended_by(error: BaseException | None, term: Term, reason: EndReason) -> None:
    """``error`` is what a release of ``term`` raises once it ended for ``reason``."""
    assert isinstance(error, LeaseLost), f"the release raised {error!r}, not LeaseLost"
    assert error.reason is reason and error.term is term, (error.term, error.reason)


class Losses:
    """An ``on_lost`` callback that keeps what it was told."""

    def __init__(self) -> None:
        self._seen: list[tuple[Term, EndReason]] = []

    def __call__(self, term: Term, reason: EndReason) -> None:
        self._seen.append((term, reason))

    def seen(self, engine: Engine, timeout: float) -> list[tuple[Term, EndReason]]:
        """Every loss reported so far, once the callbacks queued until now have run (in order)."""
        done = threading.Event()
        engine.run_callback(done.set)
        assert done.wait(timeout), f"the callback thread did not catch up within {timeout:g} s"
        return list(self._seen)


__all__ = [
    "ENDINGS",
    "KINDS",
    "Ending",
    "ForkedChild",
    "Holder",
    "Losses",
    "SharedHandleTCK",
    "assert_ended_by",
    "async_handle",
    "thread_handle",
]
