"""The oracle: what must hold at every step of a run, and the record of what did not.

* at most one live process believes it holds a name (``election.term`` valid, each
  judged on its own clock at the same world instant);
* a believer's term is the newest the backend granted for that name (nobody acts on
  a term the backend already gave to someone else);
* a term that stopped being valid never becomes valid again;
* a process never frees on the backend a name it still believes it holds;
* tokens handed out per name strictly increase, in the order the backend granted them;
* no two terms any engine handed out, in any process, ever, carry the same name and
  token: two local holders with one token cannot be told apart by fencing, even when
  one ended long before the other began (a term a forked child copied from its parent
  counts once the child believes it);
* the fenced register never accepts a write of a superseded term (judged in
  :mod:`.register`);
* a leader that crashed while the world was otherwise calm is replaced within
  :attr:`SimulationConfig.takeover_bound`;
* once every fault has settled for :attr:`SimulationConfig.recovery_bound`, every
  live process has a session and every name a leader.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .config import SimulationConfig
from .trace import Trace

if TYPE_CHECKING:
    from ...engine import Term
    from .process import SimProcess

TWO_LEADERS = "two leaders at once"
SUPERSEDED_LEADER = "a leader of a superseded term"
TOKEN_NOT_INCREASING = "a token that did not increase"
STALE_WRITE = "a superseded write accepted"
REVIVED_TERM = "a term valid again after it lapsed"
RELEASED_WHILE_HELD = "a held name freed on the backend"
DUPLICATE_TERM = "two terms with one token"
SLOW_TAKEOVER = "take-over slower than the bound"
NOT_RECOVERED = "no recovery after the faults settled"


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    at: float
    detail: str

    def __str__(self) -> str:
        return f"t={self.at:.3f}: {self.kind}: {self.detail}"


@dataclass(frozen=True, slots=True)
class Takeover:
    """How long a name went without a leader after its leader crashed."""

    name: str
    crashed_at: float
    seconds: float | None  # None: nobody took over before the run ended
    checked: bool  # the world was calm enough to hold it to the bound


class GrantLog:
    """Every term the backend granted, per name, in grant order."""

    def __init__(self) -> None:
        self._order = itertools.count(1)
        self._current: dict[str, tuple[str, int]] = {}  # name -> (session id, token) of the newest term
        self._highest: dict[str, int] = {}
        self._grants: dict[tuple[str, str, int], int] = {}

    def record(self, name: str, session_id: str, token: int) -> bool:
        """Note a grant; False when it is a new term whose token did not increase."""
        if self._current.get(name) == (session_id, token):
            return True  # the holder asked again: same term
        self._current[name] = (session_id, token)
        self._grants[(name, session_id, token)] = next(self._order)
        increased = token > self._highest.get(name, 0)
        self._highest[name] = max(token, self._highest.get(name, 0))
        return increased

    def newest(self, name: str) -> tuple[str, int] | None:
        return self._current.get(name)

    def order_of(self, name: str, session_id: str, token: int) -> int:
        """The place of a term in grant order (larger: granted later)."""
        return self._grants[(name, session_id, token)]


class Checker:
    """Checks the invariants as the world steps, and keeps the violations.

    A process's beliefs can only grow while its own code runs (a reply, a timer, a
    callback): terms otherwise only lose validity as its clock advances. So the world
    reports each step that ran a process's code (:meth:`process_ran`) and each grant
    (:meth:`name_granted`), and a name is checked across every process when one of
    them gains a term for it or the backend grants it. :meth:`check_all` looks at
    everything (``SimulationConfig.check_every_event`` calls it after every event).
    """

    def __init__(self, config: SimulationConfig, grants: GrantLog, trace: Trace, clock: Callable[[], float]):
        self.config = config
        self.grants = grants
        self.trace = trace
        self._clock = clock
        self.violations: list[Violation] = []
        self.first_trace: list[str] | None = None  # the trace when the first violation was found
        self.takeovers: list[Takeover] = []
        self._reported: set[tuple[object, ...]] = set()
        self._leaders: dict[str, list[Term]] = {name: [] for name in config.all_names}
        # per process: each term seen valid, with its local deadline as last seen
        self._seen: dict[SimProcess, dict[Term, float]] = {}
        self._lapsed: set[Term] = set()  # terms seen valid, then seen invalid
        self._pending: dict[str, tuple[float, bool]] = {}  # name -> (crash time, checked)
        # (name, token) -> the first term seen with it, and the process it was seen in
        self._terms: dict[tuple[str, int], tuple[Term, str]] = {}
        self._recovery_from: float | None = None
        self.recovery: float | None = None  # seconds from the last fault's end until every name led
        # (name, session id, token) of terms an operator force-released: trusted until their
        # holder hears of it, so excused from "two leaders" and "a superseded leader" (sharing.py)
        self._revoked: set[tuple[str, str, int]] = set()

    def revoke(self, name: str, session_id: str, token: int) -> None:
        """An operator force-released this term: its holder is no leader the oracle counts."""
        self._revoked.add((name, session_id, token))

    def watch_recovery(self, since: float) -> None:
        """Measure how long after ``since`` (the last fault's end) every name has a leader again."""
        self._recovery_from = since

    def violate(self, kind: str, detail: str, key: tuple[object, ...] | None = None) -> None:
        if key is not None:
            if key in self._reported:
                return
            self._reported.add(key)
        violation = Violation(kind, self._clock(), detail)
        self.violations.append(violation)
        self.trace.add(violation.at, "ORACLE", "VIOLATION %s: %s", kind, detail)
        if self.first_trace is None:
            self.first_trace = self.trace.lines()

    # -- as the world steps -------------------------------------------------------------

    def process_ran(self, process: SimProcess, alive: Sequence[SimProcess]) -> None:
        """Code of ``process`` just ran: look at what it believes now."""
        terms = process.app.beliefs()
        seen = self._seen.get(process)
        if not seen:
            if not terms:
                return  # believed nothing and believes nothing: most steps of a process that leads nothing
            seen = {}
        local_now = process.runtime.now()
        changed: set[str] = set()
        for term in terms:
            deadline = seen.get(term)
            if deadline is None or local_now >= deadline:
                changed.add(term.name)  # new, or lapsed since we last looked and valid again
                self.term_granted(process, term)
                if deadline is not None or term in self._lapsed:
                    self.violate(
                        REVIVED_TERM,
                        f"{process.label}'s {term.name}#{term.token} is valid again after it lapsed",
                        (REVIVED_TERM, term.name, term.session_id, term.token),
                    )
        if changed or len(terms) != len(seen):
            for term in seen:
                if term not in terms:
                    self._lapsed.add(term)
                    changed.add(term.name)
        # the deadlines as of now: a renewal in this step may have moved them (a loop, not a
        # comprehension: cheaper for the few terms a process holds, at every step)
        deadlines = self._seen[process] = {}
        for term in terms:
            deadlines[term] = local_now + term.remaining
        if changed:
            for name in sorted(changed):
                self.check_name(name, alive)

    def name_granted(self, name: str, alive: Sequence[SimProcess]) -> None:
        """The backend granted ``name``: whoever still believes an older term is wrong now."""
        self.check_name(name, alive)

    def check_all(self, alive: Sequence[SimProcess]) -> None:
        for process in alive:
            self.process_ran(process, alive)
        for name in self.config.all_names:
            self.check_name(name, alive)

    def check_name(self, name: str, alive: Sequence[SimProcess]) -> None:
        believers = [(p, term) for p in alive for term in p.app.believed(name)]
        if self._revoked:
            believers = [b for b in believers if (name, b[1].session_id, b[1].token) not in self._revoked]
        terms = [term for _, term in believers]
        if terms != self._leaders[name]:
            self._leaders[name] = terms
            labels = ", ".join(f"{p.label}#{term.token}" for p, term in believers)
            self.trace.add(self._clock(), "ORACLE", "leaders of %s: %s", name, labels or "none")
            if len(believers) > 1:
                key = tuple((term.session_id, term.token) for term in terms)
                self.violate(TWO_LEADERS, f"{name}: {labels}", (TWO_LEADERS, name, key))
        if not believers:
            return
        newest = self.grants.newest(name)
        for process, term in believers:
            if newest is None or newest[0] != term.session_id or newest[1] != term.token:
                self.violate(
                    SUPERSEDED_LEADER,
                    f"{process.label} believes it holds {name} with token {term.token}, "
                    f"but the backend granted {newest}",
                    (SUPERSEDED_LEADER, name, term.session_id, term.token),
                )
        if name in self._pending:
            crashed_at, checked = self._pending.pop(name)
            self._took_over(name, crashed_at, self._clock() - crashed_at, checked)
        since = self._recovery_from
        if (
            since is not None
            and self.recovery is None
            and self._clock() >= since
            and all(any(p.app.believed(n) for p in alive) for n in self.config.names)
        ):
            self.recovery = self._clock() - since

    def term_granted(self, process: SimProcess, term: Term) -> None:
        """``process`` holds ``term``: granted by its engine, or believed. One term per token."""
        key = (term.name, term.token)
        first = self._terms.get(key)
        if first is None:
            self._terms[key] = (term, process.label)
        elif first[0] is not term:
            self.violate(
                DUPLICATE_TERM,
                f"{term.name}#{term.token}: a term of {first[1]} and another of {process.label} "
                f"(sessions {first[0].session_id} and {term.session_id})",
                (DUPLICATE_TERM, term.name, term.token),
            )

    def released(self, process: SimProcess, session_id: str, name: str, token: int) -> None:
        """``process``'s release freed the term ``token`` of ``name`` on the backend."""
        if process.stopped:
            return  # a crashed process believes nothing
        for term in process.app.believed(name):
            if term.session_id == session_id and term.token == token:
                self.violate(
                    RELEASED_WHILE_HELD,
                    f"{process.label} freed {name} while holding {name}#{term.token} of {session_id}",
                    (RELEASED_WHILE_HELD, name, session_id, term.token),
                )

    def token_granted(self, name: str, session_id: str, token: int) -> None:
        if not self.grants.record(name, session_id, token):
            detail = f"{name}: token {token} granted to {session_id} after a higher one"
            self.violate(TOKEN_NOT_INCREASING, detail)

    def write_judged(self, name: str, token: int, writer: str, superseded: bool) -> None:
        if superseded:
            self.violate(STALE_WRITE, f"{name}: token {token} from {writer} after a newer term wrote")

    # -- take-over after a crash --------------------------------------------------------

    def leader_crashed(self, process: SimProcess, checked: bool) -> None:
        """``process`` crashes now; every name it leads must find a new leader in time."""
        for name in self.config.names:
            if process.app.believed(name) and name not in self._pending:
                self._pending[name] = (self._clock(), checked)

    def _took_over(self, name: str, crashed_at: float, seconds: float | None, checked: bool) -> None:
        self.takeovers.append(Takeover(name, crashed_at, seconds, checked))
        bound = self.config.takeover_bound
        if checked and (seconds is None or seconds > bound):
            took = "no take-over" if seconds is None else f"took {seconds:.3f} s"
            detail = f"{name}: {took} after the crash at {crashed_at:.3f} (bound {bound:.3f} s)"
            self.violate(SLOW_TAKEOVER, detail)

    # -- the end ----------------------------------------------------------------------

    def finish(self, alive: Sequence[SimProcess], members: set[str], recovered_by: float | None) -> None:
        """Close pending take-overs; check recovery when the run's tail was calm long enough."""
        now = self._clock()
        for name, (crashed_at, checked) in sorted(self._pending.items()):
            self._took_over(name, crashed_at, None, checked and now - crashed_at > self.config.takeover_bound)
        self._pending.clear()
        if recovered_by is None or now < recovered_by:
            return
        for process in alive:
            session_id = process.engine.session_id
            if session_id is None:
                self.violate(NOT_RECOVERED, f"{process.label} has no session")
            elif session_id not in members:
                self.violate(NOT_RECOVERED, f"{process.label}'s session {session_id} is not in its group")
        for name in self.config.names:
            if not any(p.app.believed(name) for p in alive):
                self.violate(NOT_RECOVERED, f"{name} has no leader")
