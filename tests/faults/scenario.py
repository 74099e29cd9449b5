"""One real-fault test run: a fleet of workers on one backend, a fault, and the verdict.

The timings are short so every fault plays out in seconds: a 2 s lease renewed
every 0.5 s. After a holder dies or stalls, a contender takes over once the
backend lets its session expire (at most one lease after its last renewal),
at its next attempt (polled backends retry within renew/2; notified ones
retry at renew/2 plus up to renew/4 of jitter when no release is announced),
plus the calls' own latency. That is :attr:`Timing.takeover_bound`; a fault
that needs time of its own to be noticed (a server restart, an election) adds
its measured duration to it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from django_simba.testing import wait_until
from tests.faults import register
from tests.faults.checks import Verdict, terms_of, verify
from tests.faults.fleet import Event, Fleet, WorkerProcess, wait_for


@dataclass(frozen=True)
class Timing:
    lease: float = 2.0
    renew: float = 0.5
    #: What a call may take on a loaded 2-core machine (acquire, open session, register write).
    latency: float = 0.5

    @property
    def retry(self) -> float:
        """The longest wait between two attempts of a waiting contender (renew/2 + renew/4 jitter)."""
        return self.renew / 2 + self.renew / 4

    @property
    def takeover_bound(self) -> float:
        return self.lease + self.retry + self.latency


TIMING = Timing()

WORKER_SETTINGS: dict[str, Any] = {
    "lease": TIMING.lease,
    "renew": TIMING.renew,
    "hold": [0.3, 0.8],  # seconds a holder keeps the lock
    "gap": [0.05, 0.2],  # seconds a worker rests between rounds
    "write_interval": 0.05,
    "acquire_timeout": 1.0,
}


@dataclass(frozen=True)
class RegisterDB:
    dsn: str
    schema: str
    admin: psycopg.Connection[Any]  # an autocommit connection in the run's schema


@dataclass
class Result:
    """One fault's measurements, for the summary at the end of the run."""

    backend: str
    fault: str
    takeover: float | None
    bound: float
    detection: float | None = None  # how long the fault itself took to be noticed, where it applies
    verdict: Verdict | None = None
    problems: list[str] = field(default_factory=list)
    note: str = ""


class FaultRun:
    """The fleet of one test and its register cell; ``finish`` stops it and judges."""

    def __init__(self, register_db: RegisterDB, directory: Path, results: list[Result]) -> None:
        self.register_db = register_db
        self.directory = directory
        self.results = results
        self.label = ""
        self.name = f"fault.{uuid.uuid4().hex[:12]}"
        self.fleet: Fleet | None = None

    def start(
        self,
        label: str,
        backend: str,
        options: dict[str, Any],
        databases: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> Fleet:
        """Start three workers on ``backend`` and wait until each opened its session.

        ``label`` names the backend in the summary ("postgresql", "redis"...).
        """
        self.label = label
        register.create_name(self.register_db.admin, self.name)
        config = {
            **WORKER_SETTINGS,
            "backend": backend,
            "options": options,
            "databases": databases or {},
            "lock": self.name,
            "register": {"dsn": self.register_db.dsn, "schema": self.register_db.schema},
            **overrides,
        }
        self.fleet = Fleet(self.directory, config)
        self.fleet.start()
        return self.fleet

    def highest_token(self) -> int:
        return register.highest_token(self.register_db.admin, self.name)

    def first_term_after(self, moment: float, timeout: float, *, besides: str | None = None) -> Event:
        """The first term granted after ``moment`` (to a worker other than ``besides``); waits for it."""
        assert self.fleet is not None
        fleet = self.fleet
        return wait_for(
            lambda: next(iter(fleet.acquired_after(moment, besides=besides)), None),
            timeout,
            f"a term granted after {moment:.3f}" + (f" to another worker than {besides}" if besides else ""),
        )

    def takeover(self, fault_at: float, victim: WorkerProcess, timeout: float) -> Event:
        """The first term another worker got after the fault (waits for it)."""
        return self.first_term_after(fault_at, timeout, besides=victim.id)

    def keep_going(self, since: float, terms: int = 2, timeout: float = 20.0) -> None:
        """Wait until ``terms`` more terms were granted after ``since``: the lock still changes hands."""
        assert self.fleet is not None
        fleet = self.fleet
        wait_until(
            lambda: len(fleet.acquired_after(since)) >= terms,
            timeout,
            message=f"{terms} terms after the fault",
        )

    def finish(
        self,
        fault: str,
        *,
        takeover: float | None,
        bound: float,
        detection: float | None = None,
        killed: Collection[str] = (),
        paused: dict[str, tuple[float, float]] | None = None,
        revoked: dict[tuple[str, int], tuple[float, float]] | None = None,
        note: str = "",
    ) -> Verdict:
        """Stop the fleet, judge everything, record the result; fail on any violation."""
        assert self.fleet is not None
        self.fleet.stop()
        events = self.fleet.events()
        history = register.history(self.register_db.admin, self.name)
        verdict = verify(events, history, killed=killed, paused=paused, revoked=revoked)
        problems = self.fleet.problems()
        self.results.append(Result(self.label, fault, takeover, bound, detection, verdict, problems, note))
        assert not problems, f"workers crashed or hung: {problems}; logs in {self.directory}"
        assert not verdict.violations, f"violations: {verdict.violations}; logs in {self.directory}"
        if takeover is not None:
            assert takeover <= bound, f"take-over after {takeover:.3f} s, bound {bound:.3f} s"
        return verdict

    def close(self) -> None:
        if self.fleet is not None:
            self.fleet.stop()


# -- the faults ---------------------------------------------------------------------------------


def sigkill_holder(run: FaultRun) -> None:
    """SIGKILL the holder: another worker takes over once its session expires."""
    fleet = _fleet(run)
    victim, acquired = fleet.fresh_holder()
    fault_at = time.monotonic()
    victim.kill()
    released = [e for e in victim.events() if e["e"] == "released" and e["token"] == acquired["token"]]
    assert not released, f"{victim.id} released its term before the kill: the fault missed the holder"
    new = run.takeover(fault_at, victim, TIMING.takeover_bound + 10)
    run.keep_going(fault_at)
    run.finish("SIGKILL", takeover=new["at"] - fault_at, bound=TIMING.takeover_bound, killed={victim.id})


def sigstop_holder(run: FaultRun) -> None:
    """SIGSTOP the holder until a newer holder wrote, then SIGCONT: its stale write must be refused."""
    fleet = _fleet(run)
    victim, acquired = fleet.fresh_holder()
    token = acquired["token"]
    fault_at = time.monotonic()
    victim.pause()
    wait_until(
        lambda: run.highest_token() > token, TIMING.takeover_bound + 10, message="a newer holder wrote"
    )
    # and paused for longer than a lease, whatever the take-over took
    wait_until(
        lambda: time.monotonic() > fault_at + TIMING.lease + 0.1, TIMING.lease + 1, message="one lease"
    )
    resumed_at = time.monotonic()
    victim.resume()
    new = run.takeover(fault_at, victim, 1)

    def term_over() -> bool:
        return any(
            e["e"] == "released" and e["token"] == token and e["t"] > resumed_at for e in victim.events()
        )

    wait_until(term_over, 5, message=f"{victim.id} ending its term once resumed")
    after = [
        e for e in victim.events() if e["e"] == "write" and e["token"] == token and e["checked"] >= fault_at
    ]
    assert after, f"{victim.id} sent no write once resumed (it always sends a late one)"
    assert not any(e["accepted"] for e in after), f"stale write accepted after SIGCONT: {after}"
    run.keep_going(resumed_at)
    verdict = run.finish(
        "SIGSTOP",
        takeover=new["at"] - fault_at,
        bound=TIMING.takeover_bound,
        paused={victim.id: (fault_at, resumed_at)},
        note=f"paused {resumed_at - fault_at:.2f} s; {len(after)} write(s) after SIGCONT, all refused",
    )
    assert verdict.refused >= len(after)


def connections_killed(run: FaultRun, kill: Callable[[WorkerProcess], int], what: str) -> None:
    """Kill the holder's connections on the server: it reconnects; the lock keeps changing hands.

    The holder may keep its term (its session lives on the server, not in the
    connection), so the take-over is timed from the end of its term, whichever
    way it ended: released after its hold, or lost.
    """
    fleet = _fleet(run)
    victim, acquired = fleet.fresh_holder()
    token = acquired["token"]
    fault_at = time.monotonic()
    killed = kill(victim)
    assert killed >= 1, f"no connection of {victim.id} found on the server"
    end = wait_for(
        lambda: next(
            (e for e in victim.events() if e["e"] in ("released", "lost") and e["token"] == token), None
        ),
        TIMING.takeover_bound + 10,
        f"the end of {victim.id}'s term",
    )
    new = run.first_term_after(end["t"], TIMING.takeover_bound + 10)
    # the victim's engine recovered: it holds the lock again later
    wait_until(
        lambda: any(e["w"] == victim.id for e in fleet.acquired_after(fault_at)),
        20,
        message=f"{victim.id} acquiring again after its connections were killed",
    )
    run.finish(
        what,
        takeover=new["at"] - end["t"],
        bound=TIMING.takeover_bound,
        note=f"{killed} connection(s) killed; holder {end['e']} its term {end['t'] - fault_at:.2f} s after;"
        " take-over timed from then",
    )


#: The restart trial: this many server restarts, each once the lock changed hands again after the last.
RESTARTS = 3


@dataclass
class Trial:
    """What a restart trial saw: how long the server was down each time, and the run's verdict."""

    downtimes: list[float]
    verdict: Verdict
    seconds: float


def restart_trial(run: FaultRun, restart: Callable[[], None], what: str) -> Trial:
    """Restart the server ``RESTARTS`` times, each while a worker holds the lock (issue 22's trial).

    Each restart waits until two more terms were granted after the last one came back, so every
    restart lands on a lock that changes hands again. The verdict then holds every run to: no write
    refused while its term said valid, no token granted twice, tokens increasing, at most one
    holder believing in its term at any instant.
    """
    fleet = _fleet(run)
    started = time.monotonic()
    run.keep_going(started - 3600, terms=2)  # the lock changes hands before the first restart
    downtimes = []
    back = started
    for _ in range(RESTARTS):
        fleet.fresh_holder()  # a holder in the middle of its term: the restart hits it
        down = time.monotonic()
        restart()
        back = time.monotonic()
        downtimes.append(back - down)
        run.keep_going(back, terms=2, timeout=30)
    seconds = time.monotonic() - started
    verdict = run.finish(
        what,
        takeover=None,
        bound=0.0,
        detection=max(downtimes),
        note=f"{RESTARTS} restarts in {seconds:.1f} s, down {', '.join(f'{d:.2f}' for d in downtimes)} s",
    )
    return Trial(downtimes, verdict, seconds)


def _fleet(run: FaultRun) -> Fleet:
    assert run.fleet is not None, "start the fleet first"
    return run.fleet


def last_believed(events: list[Event], worker: str, token: int) -> float | None:
    for term in terms_of(events):
        if term.worker == worker and term.token == token:
            return term.last_believed
    return None
