"""What must hold after a fault, judged from the workers' logs and the register's history.

The workers' logs carry ``time.monotonic()`` stamps, one clock for the whole
host, so events of different processes can be ordered. The judgements are
conservative: a term counts as believed valid from the instant *before* its
worker asked ``is_valid()``, and a newer term as granted at the instant *after*
``acquire`` returned, so an overlap reported here certainly happened.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from tests.faults.fleet import Event
from tests.faults.register import Attempt

#: A live worker logs at least every acquire timeout (1 s); a longer silence is a stall.
MAX_SILENCE = 5.0


@dataclass
class TermView:
    """One term as its worker lived it."""

    worker: str
    token: int
    acquired: float  # just after lock.acquire() returned
    valid_at_acquire: bool
    believed: list[float] = field(default_factory=list)  # instants before is_valid() said True

    @property
    def last_believed(self) -> float | None:
        times = [*self.believed, *([self.acquired] if self.valid_at_acquire else [])]
        return max(times) if times else None


def terms_of(events: Sequence[Event]) -> list[TermView]:
    by_key: dict[tuple[str, int], TermView] = {}
    for event in events:
        if event["e"] == "acquired":
            by_key[(event["w"], event["token"])] = TermView(
                event["w"], event["token"], event["at"], event["valid"]
            )
        elif event["e"] == "write" and event["valid"]:
            term = by_key.get((event["w"], event["token"]))
            if term is not None:
                term.believed.append(event["checked"])
    return sorted(by_key.values(), key=lambda term: term.acquired)


@dataclass
class Verdict:
    violations: list[str]
    terms: int
    accepted: int
    refused: int  # stale writes the register refused
    late_writes: int  # writes sent after the worker saw its term invalid


def verify(
    events: Sequence[Event],
    history: Sequence[Attempt],
    *,
    killed: Collection[str] = (),
    paused: dict[str, tuple[float, float]] | None = None,
    revoked: dict[tuple[str, int], tuple[float, float]] | None = None,
) -> Verdict:
    """Every invariant of the real-fault tests; returns the violations found (empty when none).

    ``revoked`` names terms ended from outside at a known instant (a session
    closed by someone else): their holder may go on believing in them for the
    given grace, the time it needs to hear of it, and the fence covers that.
    """
    violations: list[str] = []
    terms = terms_of(events)
    violations += _register_order(history)
    violations += _history_matches_logs(events, history, killed)
    violations += _tokens_unique(terms)
    violations += _tokens_increase(terms)
    violations += _no_overlap(terms, revoked or {})
    violations += _valid_writes_accepted(events, paused or {}, revoked or {})
    violations += _no_stall(events, killed, paused or {})
    violations += _owner_agrees(events)
    return Verdict(
        violations,
        terms=len(terms),
        accepted=sum(a.accepted for a in history),
        refused=sum(not a.accepted for a in history),
        late_writes=sum(a.late for a in history),
    )


def _register_order(history: Sequence[Attempt]) -> list[str]:
    """Accepted writes, in the register's own order, never go back to a lower token."""
    accepted = sorted((a for a in history if a.accepted), key=lambda a: a.seq or 0)
    found = []
    if [a.seq for a in accepted] != list(range(1, len(accepted) + 1)):
        found.append(f"the register's accepted writes are not numbered 1..{len(accepted)}")
    highest = 0
    for attempt in accepted:
        if attempt.token < highest:
            found.append(f"stale write accepted: token {attempt.token} by {attempt.writer} after {highest}")
        highest = max(highest, attempt.token)
    return found


def _history_matches_logs(
    events: Sequence[Event], history: Sequence[Attempt], killed: Collection[str]
) -> list[str]:
    """Each worker saw the register decide as the history says; each write came from a term it held."""
    logged: dict[tuple[str, bool], int] = defaultdict(int)
    for event in events:
        if event["e"] == "write":
            logged[(event["w"], event["accepted"])] += 1
    stored: dict[tuple[str, bool], int] = defaultdict(int)
    for attempt in history:
        stored[(attempt.writer, attempt.accepted)] += 1
    found = []
    for key in set(logged) | set(stored):
        writer, accepted = key
        # a worker killed during a write may have had it applied without logging the answer
        slack = 1 if writer in killed else 0
        if not logged[key] <= stored[key] <= logged[key] + slack:
            what = "accepted" if accepted else "refused"
            found.append(f"{writer}: {logged[key]} {what} writes logged, {stored[key]} in the register")
    held = {(e["w"], e["token"]) for e in events if e["e"] == "acquired"}
    for attempt in history:
        if attempt.accepted and (attempt.writer, attempt.token) not in held:
            found.append(f"accepted write by {attempt.writer} with token {attempt.token} it never acquired")
    return found


def _tokens_unique(terms: Sequence[TermView]) -> list[str]:
    holders: dict[int, set[str]] = defaultdict(set)
    for term in terms:
        holders[term.token].add(term.worker)
    return [f"token {token} granted to {sorted(who)}" for token, who in holders.items() if len(who) > 1]


def _tokens_increase(terms: Sequence[TermView]) -> list[str]:
    """Terms valid when granted, in the order their holders got them, have increasing tokens."""
    found = []
    previous: TermView | None = None
    for term in terms:
        if not term.valid_at_acquire:
            continue  # its grant sat unread (a paused process): it arrived already void
        if previous is not None and term.token <= previous.token:
            found.append(
                f"token went back: {term.worker} got {term.token} at {term.acquired:.3f}"
                f" after {previous.worker} got {previous.token} at {previous.acquired:.3f}"
            )
        previous = term
    return found


def _no_overlap(terms: Sequence[TermView], revoked: dict[tuple[str, int], tuple[float, float]]) -> list[str]:
    """No holder believes its term valid after a newer term was granted (at most one holder)."""
    found = []
    for newer in terms:
        for older in terms:
            last = older.last_believed
            if older.token >= newer.token or last is None or last <= newer.acquired:
                continue
            revoked_at, grace = revoked.get((older.worker, older.token), (0.0, -1.0))
            if last > revoked_at + grace:
                found.append(
                    f"{older.worker} believed token {older.token} valid at {last:.3f}, after"
                    f" {newer.worker} acquired token {newer.token} at {newer.acquired:.3f}"
                )
    return found


def _valid_writes_accepted(
    events: Sequence[Event],
    paused: dict[str, tuple[float, float]],
    revoked: dict[tuple[str, int], tuple[float, float]],
) -> list[str]:
    """The register accepted every write sent while its term said valid.

    Refusing one means a newer term wrote first while the older still believed in itself: two
    holders at once. Exempt: a worker stopped on purpose between its check and its write, and a
    term ended from outside (``revoked``) within the grace its holder needs to hear of it.
    """
    found = []
    for event in events:
        if event["e"] != "write" or not event["valid"] or event["accepted"]:
            continue
        window = paused.get(event["w"])
        if window is not None and event["checked"] <= window[1]:
            continue
        revoked_at, grace = revoked.get((event["w"], event["token"]), (float("-inf"), 0.0))
        if event["checked"] <= revoked_at + grace:
            continue
        found.append(f"{event['w']}: a write with token {event['token']} refused while its term said valid")
    return found


def _owner_agrees(events: Sequence[Event]) -> list[str]:
    """Right after a grant, the backend's ``owner()`` names the same holder (pid) and token."""
    found = []
    for event in events:
        owner = event.get("owner")
        if event["e"] != "acquired" or not owner or "error" in owner:
            continue  # no answer (the backend was down): nothing to compare
        if not (event["valid"] and event["valid_after_owner"]):
            continue  # the term ended meanwhile: another owner is no contradiction
        if (owner["token"], owner["pid"]) != (event["token"], event["pid"]):
            found.append(
                f"{event['w']} (pid {event['pid']}) held token {event['token']} while owner() said"
                f" pid {owner['pid']} holds token {owner['token']}"
            )
    return found


def _no_stall(
    events: Sequence[Event], killed: Collection[str], paused: dict[str, tuple[float, float]]
) -> list[str]:
    """Every running worker kept logging (waiting, holding, writing) at least every MAX_SILENCE."""
    by_worker: dict[str, list[float]] = defaultdict(list)
    for event in events:
        by_worker[event["w"]].append(event["t"])
    found = []
    for worker, times in by_worker.items():
        if worker in killed:
            continue
        window = paused.get(worker)
        for before, after in itertools.pairwise(times):
            silence = after - before
            if window is not None and before <= window[1] and after >= window[0]:
                silence -= window[1] - window[0]  # stopped on purpose meanwhile
            if silence <= MAX_SILENCE:
                continue
            found.append(f"{worker} logged nothing for {after - before:.1f} s after {before:.3f}")
    return found
