"""One busy process: threads cycling names of their own while its one session must live on.

A threaded web server meets this in normal traffic: every request thread locks something,
and the keep-alive shares the process (and, unless the backend keeps it apart, the
connections) with them. :func:`run_busy_process` runs it on a backend for a number of lease
durations and returns what happened; :meth:`BusyRun.assert_kept` is the verdict every backend
must pass. Nothing here times anything: the session either lived through the run or it did
not, and the keep-alives are counted, not clocked.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from dataclasses import dataclass, field

from django_simba.engine import EndReason, Engine, EngineConfig, EngineObserver, Term, ThreadRuntime
from django_simba.spi import LeaseBackend, Renewal

#: The timings of the issue's report (``SIMBA = {"LEASE_DURATION": 3, "RENEW_INTERVAL": 1}``).
LEASE_DURATION = 3.0
RENEW_INTERVAL = 1.0
#: Threads of the process, each cycling a name of its own (no contention at all).
THREADS = 16
#: How many lease durations the threads keep cycling.
LEASES = 4


@dataclass
class Recorder(EngineObserver):
    """What the engine reports of the session and of the terms, gathered from its callback thread."""

    sessions_lost: list[EndReason] = field(default_factory=list)
    terms_lost: list[EndReason] = field(default_factory=list)
    kept_alive: int = 0
    keep_alives_late_or_failed: int = 0
    #: How long each keep-alive took, sent to answered (reported, never asserted).
    keep_alive_seconds: list[float] = field(default_factory=list)
    _mutex: threading.Lock = field(default_factory=threading.Lock)

    def session_lost(self, session_id: str, reason: EndReason) -> None:
        with self._mutex:
            self.sessions_lost.append(reason)

    def keep_alive_done(self, seconds: float, ok: bool) -> None:
        with self._mutex:
            self.keep_alive_seconds.append(seconds)
            if ok:
                self.kept_alive += 1
            else:
                self.keep_alives_late_or_failed += 1

    def term_ended(self, kind: str, term: Term, reason: EndReason) -> None:
        if reason.is_loss:
            with self._mutex:
                self.terms_lost.append(reason)


@dataclass
class BusyRun:
    recorder: Recorder
    cycles: list[int]
    errors: list[BaseException]
    session_before: str
    session_after: str | None
    #: When each keep-alive reached the backend (``time.monotonic()``): the engine's scheduling.
    keep_alives_sent: list[float]

    def assert_kept(self) -> None:
        """No term lost, no error in any thread, one session throughout, and keep-alives that kept up."""
        recorder = self.recorder
        assert self.errors == [], f"{len(self.errors)} errors, the first: {self.errors[0]!r}"
        assert recorder.sessions_lost == [], f"the session was lost: {recorder.sessions_lost}"
        assert recorder.terms_lost == [], f"{len(recorder.terms_lost)} terms lost: {recorder.terms_lost[:3]}"
        assert self.session_after == self.session_before
        # One keep-alive per renew interval is due; without most of them the session lives on
        # only by luck. Counted, not clocked: a late one is what the engine itself calls failed.
        due = int(LEASES * LEASE_DURATION / RENEW_INTERVAL)
        assert recorder.kept_alive >= due // 2, (
            f"{recorder.kept_alive} keep-alives renewed the session in time, of about {due} due;"
            f" {recorder.keep_alives_late_or_failed} were late or failed"
        )
        assert all(self.cycles), f"a thread made no progress: {self.cycles}"

    def summary(self) -> str:
        """The figures, for the test's output: the longest keep-alive and gap between two are shown,
        not asserted (a loaded machine stretches both)."""
        r = self.recorder
        sent = self.keep_alives_sent
        gaps = [later - earlier for earlier, later in itertools.pairwise(sent)]
        return (
            f"{sum(self.cycles)} cycles over {len(self.cycles)} threads; keep-alives in time"
            f" {r.kept_alive}, late or failed {r.keep_alives_late_or_failed}, longest"
            f" {max(r.keep_alive_seconds, default=0) * 1000:.0f} ms, longest gap between two"
            f" {max(gaps, default=0) * 1000:.0f} ms; sessions lost {len(r.sessions_lost)};"
            f" terms lost {len(r.terms_lost)}; errors {len(self.errors)}"
        )


def run_busy_process(backend: LeaseBackend, *, threads: int = THREADS, leases: int = LEASES) -> BusyRun:
    """``threads`` threads lock and unlock names of their own for ``leases`` lease durations."""
    recorder = Recorder()
    sent: list[float] = []
    keep_alive = backend.keep_alive

    def noting_keep_alive(session_id: str, lease_duration: float) -> Renewal:
        sent.append(time.monotonic())
        return keep_alive(session_id, lease_duration)

    backend.keep_alive = noting_keep_alive  # type: ignore[method-assign]
    engine = Engine(
        backend,
        EngineConfig(lease_duration=LEASE_DURATION, renew_interval=RENEW_INTERVAL, metadata="busy"),
        ThreadRuntime(),
    )
    engine.observers = [recorder]
    try:
        session_before = engine.wait_for_session(30)
        prefix = f"busy.{uuid.uuid4().hex[:8]}"
        stop = threading.Event()
        cycles = [0] * threads
        errors: list[BaseException] = []

        def cycle(index: int) -> None:
            lock = engine.lock(f"{prefix}.{index}")
            try:
                while not stop.is_set():
                    with lock:
                        pass
                    cycles[index] += 1
            except BaseException as error:  # any error is the verdict's business
                errors.append(error)

        workers = [threading.Thread(target=cycle, args=(n,), daemon=True) for n in range(threads)]
        for worker in workers:
            worker.start()
        stop.wait(leases * LEASE_DURATION)
        stop.set()
        for worker in workers:
            worker.join(30)
        session = engine.session_id
        return BusyRun(recorder, cycles, errors, session_before, session, sent)
    finally:
        engine.close()
        del backend.keep_alive
