"""The oracle has teeth: engines broken on purpose are caught, and its parts judge correctly."""

from __future__ import annotations

import dataclasses

import pytest

from django_simba.engine import EngineConfig, Term
from django_simba.engine.keeper import SessionKeeper
from django_simba.engine.membership import Membership
from django_simba.testing.simulation import SimulationConfig, World, simulate
from django_simba.testing.simulation.batch import run_seeds
from django_simba.testing.simulation.config import Premise
from django_simba.testing.simulation.invariants import (
    NOT_RECOVERED,
    SLOW_TAKEOVER,
    SUPERSEDED_LEADER,
    TWO_LEADERS,
    GrantLog,
)
from django_simba.testing.simulation.register import FencedRegister, Write
from django_simba.testing.simulation.short_grants import CALM_LOSS, session_cap
from django_simba.testing.simulation.trace import Trace

# -- broken engines are caught ----------------------------------------------------------------


def test_a_term_trusted_past_its_deadline_makes_two_leaders(monkeypatch):
    monkeypatch.setattr(Term, "is_valid", lambda self: self._ended is None)
    summary = run_seeds(range(30), SimulationConfig(seed=0))
    assert {TWO_LEADERS, SUPERSEDED_LEADER} <= set(summary.violations)


def test_a_deadline_without_the_drift_margin_makes_two_leaders(monkeypatch):
    # trusting the lease 5 % longer than the backend keeps it
    monkeypatch.setattr(EngineConfig, "trusted_until", lambda self, sent, remaining: sent + remaining * 1.05)
    summary = run_seeds(range(60), SimulationConfig(seed=0))  # about one seed in eight
    assert TWO_LEADERS in summary.violations


def test_an_engine_that_does_not_rejoin_its_groups_does_not_recover(monkeypatch):
    monkeypatch.setattr(Membership, "_submit_join", lambda self, session_id, group: None)
    summary = run_seeds(range(60), SimulationConfig(seed=0))
    assert NOT_RECOVERED in summary.violations


def test_keep_alives_on_the_configured_interval_lose_short_sessions_in_calm(monkeypatch):
    # the engine before issue 22.5: renew every RENEW_INTERVAL, whatever the backend granted
    configured = lambda self, granted: self.context.config.renew_interval  # noqa: E731
    monkeypatch.setattr(SessionKeeper, "_renew_every", configured)
    capped = [seed for seed in range(60) if session_cap(SimulationConfig(seed=seed)) is not None]
    summary = run_seeds(capped, SimulationConfig(seed=0))
    assert CALM_LOSS in summary.violations
    intact = run_seeds([seed for seed in range(60) if seed not in capped], SimulationConfig(seed=0))
    assert not intact.violations  # only a short grant does it


@dataclasses.dataclass(frozen=True, slots=True)
class _TightBound(SimulationConfig):
    @property
    def takeover_bound(self) -> float:
        # impossible: the crashed session alone lives longer, renewed a renew interval before at most
        return self.lease - 2 * self.renew


def test_a_take_over_slower_than_the_bound_is_reported():
    summary = run_seeds(range(30), _TightBound(seed=0))
    assert SLOW_TAKEOVER in summary.violations


def test_checking_only_what_changed_finds_what_checking_everything_finds(monkeypatch):
    monkeypatch.setattr(EngineConfig, "trusted_until", lambda self, sent, remaining: sent + remaining * 1.05)
    for premises in (frozenset(), frozenset({Premise.CLOCK_STEP})):
        for seed in range(10):
            lazy = simulate(SimulationConfig(seed=seed, premises=premises))
            eager = simulate(SimulationConfig(seed=seed, premises=premises, check_every_event=True))
            assert {v.kind for v in lazy.violations} == {v.kind for v in eager.violations}, seed


# -- the parts of the oracle ------------------------------------------------------------------


def test_the_fenced_register_refuses_lower_tokens_and_flags_superseded_writes():
    register = FencedRegister()
    assert register.receive(Write("a", 3, grant=1, writer="P1")) == (True, False)
    assert register.receive(Write("a", 3, grant=1, writer="P1")) == (True, False)  # the same term again
    assert register.receive(Write("a", 2, grant=0, writer="P0")) == (False, False)  # refused: lower token
    assert register.receive(Write("a", 4, grant=2, writer="P2")) == (True, False)
    # a token reset: the newest term carries a lower token and is refused, the older one then gets in
    assert register.receive(Write("a", 1, grant=3, writer="P3")) == (False, False)
    assert register.receive(Write("a", 4, grant=2, writer="P2")) == (True, True)
    assert register.receive(Write("b", 1, grant=4, writer="P3")) == (True, False)  # names are separate
    assert register.counts() == (5, 2)


def test_the_grant_log_orders_terms_and_spots_tokens_that_do_not_increase():
    grants = GrantLog()
    assert grants.record("a", "s1", 1)
    assert grants.record("a", "s1", 1)  # the holder asked again: the same term, not a new grant
    assert grants.record("a", "s2", 2)
    assert grants.newest("a") == ("s2", 2)
    assert grants.order_of("a", "s1", 1) < grants.order_of("a", "s2", 2)
    assert not grants.record("a", "s3", 1)  # a new term with a lower token
    assert grants.newest("a") == ("s3", 1)
    assert grants.newest("b") is None


def test_the_trace_keeps_the_last_events_and_formats_them_lazily():
    trace = Trace(2)
    trace.add(1.0, "P1", "first %d", 1)
    trace.add(2.0, "P2", "second %s", "x")
    trace.add(3.5, "P3", "third")
    assert trace.recorded == 3
    assert [line.split(None, 2)[2] for line in trace.lines()] == ["second x", "third"]


# -- the world's clocks -----------------------------------------------------------------------


def calm_world(seed: int) -> World:
    """A world whose processes have started, with no fault planned."""
    world = World(SimulationConfig(seed=seed))
    world.episodes = []
    world.start()
    world.advance_to(1.0)
    return world


def test_a_drifting_process_clock_and_its_timers_keep_to_its_rate():
    world = calm_world(7)
    runtime = max(world.alive, key=lambda p: abs(p.runtime.rate - 1)).runtime
    assert runtime.rate != 1 and abs(runtime.rate - 1) < world.config.drift
    start_world, start_local = world.now, runtime.now()
    fired: list[tuple[float, float]] = []
    runtime.call_later(10.0, lambda: fired.append((world.now, runtime.now())))
    world.advance_to(world.now + 20)
    assert len(fired) == 1
    world_at, local_at = fired[0]
    assert local_at == pytest.approx(start_local + 10.0)
    assert world_at - start_world == pytest.approx(10.0 / runtime.rate)


def test_a_paused_process_runs_nothing_until_resumed_and_its_clock_goes_on():
    world = calm_world(3)
    process = world.alive[0]
    ran: list[float] = []
    process.runtime.call_later(1.0, lambda: ran.append(world.now))
    local_before = process.runtime.now()
    world.pause(process, 5.0)
    world.advance_to(world.now + 5.0)
    assert ran == []
    assert process.runtime.now() - local_before == pytest.approx(5.0 * process.runtime.rate)
    world.resume(process)
    resumed_at = world.now
    world.advance_to(world.now + 0.001)
    assert ran == [resumed_at]


def test_a_crashed_process_never_runs_again_but_its_sent_requests_still_land():
    world = calm_world(3)
    process = world.alive[0]
    ran: list[float] = []
    landed: list[float] = []
    process.runtime.call_later(0.5, lambda: ran.append(world.now))
    process.runtime._deliver(process.runtime.now() + 0.5, lambda: landed.append(world.now))
    world.crash(process, checked=False)
    world.advance_to(world.now + 1.0)
    assert ran == [] and len(landed) == 1
