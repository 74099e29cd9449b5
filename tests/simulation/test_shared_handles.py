"""Shared handles in the simulation (issue 22, items 1, 3, 4): the oracle finds each defect again.

Each test below puts back one defect the engine had, with the engine otherwise as it is, and
runs seeds that must then break the invariant that names it (``sharing.py``); with the engine
as it is the same seeds break nothing (``test_seeds.py``). The sweep's own test checks that the
shared handles met every way a term ends, and forks while they were held.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from django_simba.engine import EndReason, Lock, LockHeld, Term
from django_simba.engine.holdings import Holdings
from django_simba.engine.lock import Acquisition, LockBase
from django_simba.testing.simulation import SimulationConfig, World
from django_simba.testing.simulation.batch import Summary, run_seeds
from django_simba.testing.simulation.sharing import (
    CALLER_BLOCKED,
    REFUSED_FOR_ANOTHER,
    RELEASE_MISREPORTED,
    RELEASED_BY_ANOTHER,
    Caller,
)

from .sweep import SEEDS

FOUND_BY = [0, 28, 53]  # each of them finds the first two defects below (test_seeds.py keeps them)
FOUND_BY_FORK = 222  # a fork while the main thread held: finds the third (test_seeds.py keeps it too)


def test_one_holder_per_lock_object_is_found(monkeypatch: pytest.MonkeyPatch):
    """The defect of 22.1: the object keeps one holder, so a caller whose term ended releases the
    term of the caller granted after it."""

    def keep(self: LockBase, port: Any, who: object, request: Acquisition) -> None:
        assert request.term is not None
        request.pid = request.term._pid
        self._holder_key = who  # type: ignore[attr-defined]
        self._holdings["the object"] = request
        self._hold(port, request)

    def refuse_reentry(self: LockBase, port: Any, who: object, caller: str) -> None:
        if getattr(self, "_holder_key", None) == who and self._holdings.of("the object", port.runtime.pid):
            raise LockHeld("already held")

    forget = LockBase._forget
    monkeypatch.setattr(LockBase, "_keep", keep)
    monkeypatch.setattr(LockBase, "_refuse_reentry", refuse_reentry)
    monkeypatch.setattr(LockBase, "_forget", lambda self, who, term: forget(self, "the object", term))
    found = run_seeds(FOUND_BY, SimulationConfig(seed=0))
    assert {RELEASED_BY_ANOTHER, RELEASE_MISREPORTED} <= set(found.violations), found.violations
    assert found.failing_seeds == FOUND_BY


def test_a_mutex_held_across_the_callers_block_is_found(monkeypatch: pytest.MonkeyPatch):
    """The defect of 22.4 (and 22.3's copied mutex): the object holds a lock while it is held."""
    init, keep, release = Lock.__init__, LockBase._keep, Lock.release

    def mutexed_init(self: Lock, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._mutex = threading.Lock()  # type: ignore[attr-defined]

    def mutexed_keep(self: Lock, port: Any, who: object, request: Acquisition) -> None:
        self._mutex.acquire()  # type: ignore[attr-defined]
        keep(self, port, who, request)

    def mutexed_release(self: Lock, term: Term | None = None) -> None:
        try:
            release(self, term)
        finally:
            self._mutex.release()  # type: ignore[attr-defined]

    monkeypatch.setattr(Lock, "__init__", mutexed_init)
    monkeypatch.setattr(Lock, "_keep", mutexed_keep)
    monkeypatch.setattr(Lock, "release", mutexed_release)
    found = run_seeds(FOUND_BY, SimulationConfig(seed=0))
    assert CALLER_BLOCKED in found.violations
    assert found.failing_seeds == FOUND_BY


def test_holdings_that_are_not_per_process_are_found(monkeypatch: pytest.MonkeyPatch):
    """The defect 22.3 leaves once the mutex is gone: a forked child's thread meets its parent's
    holding, and is refused as if it held the name."""

    def of(self: Holdings, caller: object, pid_of: Any) -> Acquisition | None:
        held = self.get(caller)
        return None if held is None or held.release_taken else held

    monkeypatch.setattr(Holdings, "of", of)
    found = run_seeds([*FOUND_BY, FOUND_BY_FORK], SimulationConfig(seed=0))
    assert REFUSED_FOR_ANOTHER in found.violations
    assert FOUND_BY_FORK in found.failing_seeds


# -- the invariants judge what they must -------------------------------------------------------


@pytest.fixture
def sharing():
    """The shared handles of a process that uses them, a moment into a run."""
    for seed in range(20):
        world = World(SimulationConfig(seed=seed))
        world.start()
        world.advance_to(5.0)
        for process in world.alive:
            if process.app.sharing.used:
                return process.app.sharing
    raise AssertionError("no process of the first 20 seeds uses shared handles")


def _term(sharing, token: int) -> Term:
    engine = sharing.app.engine
    return Term("delta", token, "s-test", engine.now() + 60, engine.now, engine.runtime.pid)


def _kinds(sharing) -> set[str]:
    return {v.kind for v in sharing.world.checker.violations}


def test_a_term_released_under_its_caller_is_a_violation(sharing):
    caller = sharing.threads[1]
    caller.term = _term(sharing, 900)
    caller.term._end(EndReason.RELEASED)
    sharing._check_terms()
    assert RELEASED_BY_ANOTHER in _kinds(sharing)


def test_a_term_its_own_caller_releases_is_none(sharing):
    caller = sharing.threads[1]
    term = caller.term = caller.releasing = _term(sharing, 901)
    term._end(EndReason.RELEASED)
    sharing._check_terms()
    sharing._judge_release(caller, term, None)
    assert not _kinds(sharing)


@pytest.mark.parametrize("outcome", ["returned", "not held"])
def test_a_release_that_says_nothing_of_its_callers_ended_term_is_a_violation(sharing, outcome: str):
    from django_simba.spi import LeaseNotHeld

    caller: Caller = sharing.threads[1]
    term = _term(sharing, 902)
    term._end(EndReason.MAX_HOLD)
    sharing._judge_release(caller, term, None if outcome == "returned" else LeaseNotHeld("not held"))
    assert RELEASE_MISREPORTED in _kinds(sharing)


def test_a_lock_held_inside_a_handle_blocks_its_next_caller(sharing):
    handle = sharing.lock
    handle._stuck = threading.Lock()
    handle._stuck.acquire()
    assert sharing._blocked(handle, sharing.threads[1])
    assert CALLER_BLOCKED in _kinds(sharing)


def test_an_operators_force_release_excuses_only_that_term(sharing):
    checker = sharing.world.checker
    checker.revoke("delta", "s-x", 7)
    assert ("delta", "s-x", 7) in checker._revoked


# -- the sweep met what it must ---------------------------------------------------------------


@pytest.mark.slow
def test_the_sweep_ends_shared_terms_every_way_and_forks_while_they_are_held(sweep: Summary):
    if SEEDS < 1000:
        pytest.skip("too few seeds to expect every case")
    for effect in (
        "shared handle: term ended by maximum hold time reached",
        "shared handle: term ended by deadline passed",
        "shared handle: term ended by taken",  # force-released
        "force release",
        "fork while a shared handle is held",
        "forked child starts over on a shared handle",
        "shared handle: term ended by forked",
    ):
        assert sweep.faults[effect] > 0, effect
