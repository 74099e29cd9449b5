"""What the demo proves from its rows, checked in SQL-backed Python, not assumed."""

import itertools
from dataclasses import dataclass, field

from django.db.models import Count

from .models import Tick, Ticker


@dataclass(frozen=True)
class Check:
    claim: str
    ok: bool
    detail: str


@dataclass
class Proof:
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(check.ok for check in self.checks)

    def check(self, claim: str, ok: bool, detail: str) -> None:
        self.checks.append(Check(claim, ok, detail))


def prove(
    run: str, *, killed: str | None = None, killed_token: int | None = None, kill_period: int | None = None
):
    """Check the run's ticks: no period twice, tokens never back, fence consistent, clean take-over."""
    proof = Proof()
    ticks = list(Tick.objects.filter(run=run).order_by("period", "id"))
    doubled = list(
        Tick.objects.filter(run=run)
        .values("period")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .values_list("period", "n")
    )
    proof.check(
        "no tick ran twice",
        bool(ticks) and not doubled,
        f"{len(ticks)} ticks over {len({t.period for t in ticks})} periods; "
        + (f"periods run more than once: {doubled}" if doubled else "every period ran at most once"),
    )
    backwards = [
        (a.period, a.token, b.period, b.token) for a, b in itertools.pairwise(ticks) if b.token < a.token
    ]
    tokens = sorted({t.token for t in ticks})
    proof.check(
        "tokens never went back",
        not backwards,
        f"tokens in period order: {' -> '.join(map(str, tokens))}"
        if not backwards
        else f"went back: {backwards}",
    )
    refused = [t for t in ticks if not t.accepted]
    ticker = Ticker.objects.filter(run=run).first()
    counted = ticker.ticks if ticker else -1
    accepted = len(ticks) - len(refused)
    proof.check(
        "the fenced ticker saw every tick once",
        not refused and counted == accepted,
        f"ticker counted {counted}, {accepted} writes accepted, {len(refused)} refused as stale",
    )
    if killed is not None and kill_period is not None:
        later = [t for t in ticks if t.worker == killed and t.period > kill_period]
        successors = sorted({t.token for t in ticks if t.worker != killed and t.period > kill_period})
        proof.check(
            "the take-over came with a higher token",
            not later and bool(successors) and killed_token is not None and successors[0] > killed_token,
            f"{killed} held token {killed_token} and ran {len(later)} ticks after its kill; "
            f"tokens after the kill: {', '.join(map(str, successors)) or 'none'}",
        )
    return proof
