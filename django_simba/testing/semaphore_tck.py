"""The semaphore TCK: counting semaphores on a real backend, from threads and real processes.

A semaphore's permits are ordinary leases, so a backend that passes the backend TCK keeps
every lease rule per permit; this kit checks what the engine builds on them: never more
holders than permits across processes, tokens that strictly increase per permit, a killed
holder's permit taken over in time, one permit per waiter when several are freed at once,
and a one-shot try that leaves nothing behind. Use it for a backend of your own like the
other kits::

    from django_simba.testing import SemaphoreTCK

    class TestMyBackendSemaphores(SemaphoreTCK):
        @pytest.fixture
        def backend(self):
            backend = MyBackend({"url": ...}, timeout=5)
            yield backend
            backend.close()

        @pytest.fixture
        def backend_spec(self):   # builds the backend in another process
            return "myapp.testing.build_backend", {"url": ...}

``other_backend`` is what a second process would use (by default the same object);
``backend_spec`` is ``(factory_path, kwargs)`` as for :class:`~django_simba.testing.BackendTCK`:
without it the tests that need other processes are skipped.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections import defaultdict
from typing import Any

import pytest

from ..engine import Engine, EngineConfig, Semaphore, Term, ThreadRuntime
from ..spi import LeaseBackend
from ..spi.clock import local_clock
from ..spi.dotted import import_dotted
from .engine_tck import EngineFactory, EngineKit
from .racers import process_context
from .waiting import wait_until

Spec = tuple[str, dict[str, Any]]


class SemaphoreTCK(EngineKit):
    """Semaphore conformance tests over the backend a subclass's ``backend`` fixture builds."""

    metadata = "semaphore-tck"
    #: How long another process may take to start and build its backend (Django set up).
    process_start: float = 60.0

    @pytest.fixture
    def backend_spec(self) -> Spec | None:
        """``(factory_path, kwargs)``: how to build the backend in another process."""
        return None

    @pytest.fixture
    def name(self) -> str:
        return f"stck.{uuid.uuid4().hex[:12]}"

    # -- across processes ------------------------------------------------------------------

    def test_holders_never_exceed_the_permits_across_processes(
        self, backend_spec: Spec | None, name: str
    ) -> None:
        """Processes of two threads each contend for three permits; a shared counter, raised by
        each holder once it has its permit and lowered before it releases, never passes three,
        and per permit the tokens, in the order holders entered, strictly increase."""
        spec = _required(backend_spec)
        context = process_context(spec)
        permits, processes, rounds = 3, 4, 6
        holding, peak, entries = (context.Value("i", 0) for _ in range(3))
        shared = (context.Lock(), holding, peak, entries)
        results = context.Queue()
        # Long leases: what is checked is how many hold at once, and on a loaded machine a racer's
        # keep-alive came later than the kit's 1 s lease (LeaseLost: deadline passed).
        racer = self.config(metadata="racer", lease_duration=30.0, renew_interval=10.0)
        arguments = (spec, racer, name, permits, rounds, shared, results)
        workers = [
            context.Process(target=_contend_in_process, args=arguments, daemon=True) for _ in range(processes)
        ]
        for worker in workers:
            worker.start()
        try:
            reports = [results.get(timeout=self.process_start + rounds * self.patience()) for _ in workers]
        finally:
            for worker in workers:
                worker.join(self.patience())
                if worker.is_alive():
                    worker.kill()
        errors = [report for report in reports if isinstance(report, str)]
        assert not errors, errors
        granted = sorted(entry for report in reports for entry in report)
        assert len(granted) == processes * 2 * rounds
        assert peak.value <= permits, f"{peak.value} holders of {permits} permits at once"
        assert peak.value > 1, "the holders never overlapped: the test proved nothing"
        by_permit: dict[str, list[int]] = defaultdict(list)
        for _, permit, token in granted:
            by_permit[permit].append(token)
        assert set(by_permit) <= {f"{name}:{number}" for number in range(1, permits + 1)}
        for permit, tokens in by_permit.items():
            assert tokens == sorted(set(tokens)), f"{permit}: tokens {tokens} in entry order"

    def test_a_killed_holders_permit_is_taken_within_the_bound(
        self, backend: LeaseBackend, backend_spec: Spec | None, make_engine: EngineFactory, name: str
    ) -> None:
        """Another process holds both permits and is killed with SIGKILL: a waiter here gets a
        permit within a lease, a retry (half a renew interval and its jitter) and the margin."""
        spec = _required(backend_spec)
        context = process_context(spec)
        ready = context.Queue()
        holder = context.Process(
            target=_hold_in_process, args=(spec, self.config(metadata="victim"), name, 2, ready), daemon=True
        )
        holder.start()
        try:
            held = ready.get(timeout=self.process_start)
            assert isinstance(held, dict), held
            engine = make_engine(backend)
            waiter = _Taker(engine.semaphore(name, 2), timeout=None)
            wait_until(lambda: _in_every_line(engine, name, 2), self.patience(), message="the waiter in line")
            assert holder.pid is not None
            os.kill(holder.pid, signal.SIGKILL)
            killed = local_clock()
            bound = self.lease_duration + self.renew_interval * 0.75 + self.margin
            term = waiter.result(bound + self.margin)
            took = local_clock() - killed
        finally:
            holder.kill()
            holder.join(self.patience())
        assert took <= bound, f"the permit was taken {took:.2f} s after the kill (bound {bound:.2f} s)"
        assert term.token > held[term.name]
        waiter.finish()

    # -- in one process and another -----------------------------------------------------------

    def test_tokens_strictly_increase_per_permit(
        self, backend: LeaseBackend, other_backend: LeaseBackend, make_engine: EngineFactory, name: str
    ) -> None:
        semaphores = [make_engine(backend).semaphore(name, 2), make_engine(other_backend).semaphore(name, 2)]
        tokens: dict[str, list[int]] = defaultdict(list)
        for turn in range(12):
            held = [semaphore.acquire(5) for semaphore in (semaphores if turn % 3 else semaphores[::-1])]
            assert len({term.name for term in held}) == 2
            for term in held:
                tokens[term.name].append(term.token)
            for semaphore in semaphores:
                semaphore.release()
        assert set(tokens) == {f"{name}:1", f"{name}:2"}
        for permit, seen in tokens.items():
            assert seen == sorted(set(seen)) and seen[0] > 0, f"{permit}: {seen}"

    def test_waiters_freed_at_once_each_get_one_permit_and_the_rest_is_free(
        self, backend: LeaseBackend, other_backend: LeaseBackend, make_engine: EngineFactory, name: str
    ) -> None:
        """Where a release hands the name to the next session in line, both waiting sessions are in
        every permit's line: a permit handed to a session already served must be passed on."""
        permits = [f"{name}:{number}" for number in range(1, 4)]
        holder = backend.open_session(30.0, "holder").session_id
        try:
            for permit in permits:
                assert backend.acquire(holder, permit) is not None
            engines = [make_engine(backend), make_engine(other_backend)]
            waiters = [_Taker(engine.semaphore(name, 3), timeout=None) for engine in engines]
            wait_until(
                lambda: all(_in_every_line(engine, name, 3) for engine in engines),
                self.patience(),
                message="both waiters in every line",
            )
            for permit in permits:
                backend.release(holder, permit)
            terms = [waiter.result(self.patience()) for waiter in waiters]
            assert len({term.name for term in terms}) == 2
            sessions = {engine.session_id for engine in engines}

            def settled() -> bool:
                held = backend.leases(f"{name}:")
                return len(held) == 2 and {info.session_id for info in held} == sessions

            wait_until(settled, self.patience(), message="one permit each, the third one free")
            for waiter in waiters:
                waiter.finish()
        finally:
            backend.close_session(holder)

    def test_a_try_that_finds_every_permit_held_leaves_nothing_behind(
        self, backend: LeaseBackend, make_engine: EngineFactory, name: str
    ) -> None:
        """A one-shot try puts the session in no backend line: a release right after it frees the
        permit for anyone, and the engine here keeps no claim in line."""
        permits = [f"{name}:{number}" for number in range(1, 3)]
        holder = backend.open_session(30.0, "holder").session_id
        third = backend.open_session(30.0, "third").session_id
        try:
            for permit in permits:
                assert backend.acquire(holder, permit) is not None
            # A long lease: what is checked is who stands in line, and a keep-alive that a loaded
            # machine delayed past the kit's 1 s lease ended the session, so the last try failed.
            engine = make_engine(backend, lease_duration=30.0, renew_interval=10.0)
            semaphore = engine.semaphore(name, 2)
            assert semaphore.try_acquire() is None
            assert not _in_any_line(engine, name, 2)
            backend.release(holder, permits[0])
            assert backend.acquire(third, permits[0]) is not None, "the try left its session in line"
            backend.release(holder, permits[1])
            term = semaphore.try_acquire()  # the other permit, once free
            assert term is not None and term.name == permits[1]
            semaphore.release()
        finally:
            backend.close_session(third)
            backend.close_session(holder)

    def test_holders_are_listed_by_permit(
        self, backend: LeaseBackend, make_engine: EngineFactory, name: str
    ) -> None:
        engine = make_engine(backend)
        outsider = engine.lock(f"{name}:other")  # a lease under the same prefix that is no permit
        outsider.acquire(5)
        semaphore = engine.semaphore(name, 3)
        term = semaphore.acquire(5)
        infos = semaphore.holders()
        assert [(info.name, info.token, info.session_id) for info in infos] == [
            (term.name, term.token, engine.session_id)
        ]
        semaphore.release()
        outsider.release()


def _required(spec: Spec | None) -> Spec:
    if spec is None:
        pytest.skip("no backend_spec: the backend cannot be built in another process")
    return spec


def _in_every_line(engine: Engine, name: str, permits: int) -> bool:
    with engine.mutex:
        slots = [engine.lines.slots.get(f"{name}:{number}") for number in range(1, permits + 1)]
        return all(slot is not None and slot.waiting for slot in slots)


def _in_any_line(engine: Engine, name: str, permits: int) -> bool:
    with engine.mutex:
        slots = [engine.lines.slots.get(f"{name}:{number}") for number in range(1, permits + 1)]
        return any(slot is not None and slot.waiting for slot in slots)


class _Taker:
    """A thread that acquires ``semaphore`` and keeps the permit until :meth:`finish`."""

    def __init__(self, semaphore: Semaphore, *, timeout: float | None) -> None:
        self.term: Term | None = None
        self._error: BaseException | None = None
        self._granted = threading.Event()
        self._done = threading.Event()
        self._semaphore = semaphore
        self._thread = threading.Thread(target=self._run, args=(timeout,), daemon=True)
        self._thread.start()

    def _run(self, timeout: float | None) -> None:
        try:
            self.term = self._semaphore.acquire(timeout)
        except BaseException as error:  # reported to the test
            self._error = error
            self._granted.set()
            return
        self._granted.set()
        self._done.wait(60)
        self._semaphore.release()

    def result(self, timeout: float) -> Term:
        assert self._granted.wait(timeout), f"no permit within {timeout:.2f} s"
        if self._error is not None:
            raise self._error
        assert self.term is not None
        return self.term

    def finish(self) -> None:
        self._done.set()
        self._thread.join(10)


# -- what the other processes run ----------------------------------------------------------------


def _build(spec: Spec) -> LeaseBackend:
    path, kwargs = spec
    backend: LeaseBackend = import_dotted(path)(**kwargs)
    return backend


def _contend_in_process(
    spec: Spec,
    config: EngineConfig,
    name: str,
    permits: int,
    rounds: int,
    shared: tuple[Any, Any, Any, Any],
    results: Any,
) -> None:
    """Two threads take a permit ``rounds`` times each; reports (entry, permit, token) per term."""
    mutex, holding, peak, entries = shared
    granted: list[tuple[int, str, int]] = []
    failures: list[str] = []
    try:
        engine = Engine(_build(spec), config, ThreadRuntime())
    except Exception as error:  # reported to the test
        results.put(f"{type(error).__name__}: {error}")
        return
    semaphore = engine.semaphore(name, permits, timeout=60)

    def take_turns() -> None:
        try:
            for _ in range(rounds):
                with semaphore as term:
                    with mutex:
                        holding.value += 1
                        peak.value = max(peak.value, holding.value)
                        entries.value += 1
                        granted.append((entries.value, term.name, term.token))
                    time.sleep(0.02)  # the work under the permit, so that holders overlap
                    with mutex:
                        holding.value -= 1
        except Exception as error:  # reported to the test
            failures.append(f"{type(error).__name__}: {error}")

    threads = [threading.Thread(target=take_turns) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    engine.close()
    results.put("; ".join(failures) if failures else granted)


def _hold_in_process(spec: Spec, config: EngineConfig, name: str, permits: int, ready: Any) -> None:
    """Hold every permit, report their tokens, and wait to be killed."""
    engine = Engine(_build(spec), config, ThreadRuntime())
    terms = [engine.semaphore(name, permits).acquire(30) for _ in range(permits)]
    ready.put({term.name: term.token for term in terms})
    threading.Event().wait()
