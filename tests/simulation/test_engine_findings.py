"""Engine issues the simulation found, each reduced to a scripted scenario on one virtual clock.

Each was a failure before its fix in the engine (or the token-scoped release of
the SPI); they stay as regression tests. The last five were found by the widened
model (a backend that hands names over, every call late, forks without hooks) and
fail until the engine is fixed.
"""

from __future__ import annotations

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import CONTEND_LANE, SESSION_LANE, Election, Engine, EngineConfig
from django_simba.errors import LeaseLost
from django_simba.spi import BackendTimeout, BackendUnavailable, Grant
from django_simba.testing.runtime import Fate, VirtualRuntime
from django_simba.testing.simulation import SimulationConfig, World
from django_simba.testing.simulation.config import HandOver
from tests.engine.scripted import DRIFT, LEASE, RENEW, ScriptedRuntime
from tests.engine.scripted import scripted_runtime as scripted_runtime  # the module's `runtime` fixture


@pytest.fixture
def backend(runtime: ScriptedRuntime) -> MemoryBackend:
    return MemoryBackend(timeout=RENEW, clock=runtime.now)


def started_engine(runtime: VirtualRuntime, backend: MemoryBackend) -> Engine:
    """An engine on ``backend``, with its session open."""
    engine = Engine(backend, EngineConfig(lease_duration=LEASE, renew_interval=RENEW, drift=DRIFT), runtime)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 1)
    return engine


@pytest.fixture
def engine(runtime: ScriptedRuntime, backend: MemoryBackend) -> Engine:
    engine = started_engine(runtime, backend)
    runtime.advance(0.1)  # the calls made at opening (a purge) are done: scripts start after them
    return engine


def test_a_queued_acquire_counts_its_term_from_when_it_was_sent(runtime, backend, engine):
    runtime.script[CONTEND_LANE].append(Fate(reply_delay=4.0))  # a slow call holds the lane for 4 s
    engine.submit(lambda: backend.members("workers"), lambda outcome: None)
    election = engine.election("alpha")
    runtime.run_until_true(lambda: election.is_leader, RENEW)
    granted = backend.owner("alpha")  # same virtual instant as the grant: the reply took no time
    assert granted is not None
    # design, Local deadline: sent_at + remaining * (1 - DRIFT), sent_at being when the request left
    assert election.term.remaining == pytest.approx(granted.remaining * (1 - DRIFT), abs=1e-6)


def test_a_term_that_lapsed_is_revoked_and_never_valid_again(runtime, backend, engine):
    events: list[tuple[str, int]] = []
    start = runtime.now()
    runtime.script[CONTEND_LANE].append(Fate(request_delay=3.0))  # the acquire lands 3 s after it left
    runtime.script[SESSION_LANE].append(Fate(lose_request=True))  # the first keep-alive is lost
    election = engine.election(
        "alpha",
        on_elected=lambda term: events.append(("elected", term.token)),
        on_revoked=lambda term: events.append(("revoked", term.token)),
    )
    runtime.run_until_true(lambda: election.is_leader, RENEW)
    term = election.term
    # granted 12 s of lease, trusted from the send time: 11.88 s. The session itself is trusted
    # until 14.85 s; its keep-alive at 5 s is lost, the retry goes at 12.5 s.
    runtime.run_until(start + 12.0)
    assert not term.is_valid()
    assert engine.session_id is not None  # the session has not passed its own deadline
    runtime.run_until(start + 13.0)  # the retried keep-alive came back listing alpha
    assert not term.is_valid(), "a term that lapsed became valid again"
    assert ("revoked", 1) in events


def test_a_late_keep_alive_reply_never_frees_a_newer_term(runtime, backend, engine):
    lock = engine.lock("gamma")
    first = lock.acquire(0)
    runtime.script[SESSION_LANE].append(Fate(reply_delay=3.0))  # the next keep-alive answers late
    keep_alive_at = runtime.now() + RENEW
    runtime.run_until(keep_alive_at + 0.5)  # applied on the backend (listing gamma: first), not answered
    lock.release()
    second = lock.acquire(0)
    assert second.token == first.token + 1
    runtime.run_until(keep_alive_at + 3.5)  # the late reply is in
    assert second.is_valid()
    holder = backend.owner("gamma")
    assert holder is not None and holder.session_id == engine.session_id, "the held term was freed"
    rival = backend.open_session(LEASE, "rival").session_id
    assert backend.acquire(rival, "gamma") is None


def test_a_release_applied_after_its_timeout_never_frees_a_newer_term(runtime, backend, engine):
    lock = engine.lock("gamma", max_hold=1.0)
    first = lock.acquire(0)
    runtime.script[CONTEND_LANE].append(Fate(request_delay=RENEW + 2))  # the release lands after its timeout
    start = runtime.now()
    runtime.run_until(start + 1.0 + RENEW + 0.1)  # the maximum hold released it; the release timed out
    assert not first.is_valid()
    with pytest.raises(LeaseLost):
        lock.release()  # forget the ended term, told it ended by its maximum hold time
    other = engine.lock("gamma")  # held with no maximum
    second = None
    for _ in range(3):  # the backend still lists the old term: the engine frees it, then takes a new one
        second = other.try_acquire()
        if second is not None:
            break
        runtime.advance(0.1)
    assert second is not None and second.token > first.token
    runtime.run_until(start + 1.0 + RENEW + 2.5)  # the late release is applied now
    assert second.is_valid()
    holder = backend.owner("gamma")
    assert holder is not None and holder.session_id == engine.session_id, "the held term was freed"


# -- found by the widened model: they fail on the engine the simulation was widened against -------


class RefusingBackend(MemoryBackend):
    """Hands names over; refuses, unapplied, every call of the operations in ``refused``."""

    def __init__(self, **options: object) -> None:
        super().__init__(hand_over=True, **options)  # type: ignore[arg-type]
        self.refused: set[str] = set()

    def _release(self, session_id: str, name: str, token: int | None) -> None:
        if "release" in self.refused:
            raise BackendUnavailable("connection reset")
        super()._release(session_id, name, token)

    def _acquire(self, session_id: str, name: str, wait: bool) -> Grant | None:
        if "acquire" in self.refused:
            raise BackendUnavailable("connection reset")
        return super()._acquire(session_id, name, wait)


def two_local_candidates(runtime: ScriptedRuntime, engine: Engine) -> tuple[Election, Election]:
    """A leads ``x``; B, a second candidate of the same process, waits behind it."""
    leader = engine.election("x")
    runtime.run_until_true(lambda: leader.is_leader, 1)
    waiter = engine.election("x")
    runtime.advance(0.1)
    assert waiter.term is None
    return leader, waiter


def test_a_term_whose_release_failed_is_never_handed_to_another_local_candidate(runtime):
    backend = RefusingBackend(timeout=RENEW, clock=runtime.now)
    engine = started_engine(runtime, backend)
    leader, waiter = two_local_candidates(runtime, engine)
    first = leader.term
    assert first is not None
    backend.refused = {"release", "acquire"}
    leader.close()  # its release fails unapplied: the backend still lists x for this session
    keep_alive_at = runtime.now() + RENEW
    runtime.run_until(keep_alive_at + 0.1)  # B's attempts failed meanwhile; the keep-alive lists x
    assert backend.keep_alive(engine.session_id, LEASE).owned == {"x": first.token}
    term = waiter.term
    assert term is None or term.token > first.token, f"B holds {term}, the token of A's {first}"


def test_a_keep_alive_listing_older_than_a_release_hands_nothing_to_another_local_candidate(runtime):
    backend = MemoryBackend(timeout=RENEW, clock=runtime.now, hand_over=True)
    engine = started_engine(runtime, backend)
    leader, waiter = two_local_candidates(runtime, engine)
    first = leader.term
    assert first is not None
    rival = backend.open_session(LEASE, "rival").session_id
    assert backend.acquire(rival, "x", wait=True) is None  # another session waits in x's line
    runtime.script[SESSION_LANE].append(Fate(reply_delay=2.0))  # the next keep-alive answers late
    keep_alive_at = runtime.now() + RENEW
    runtime.run_until(keep_alive_at + 0.5)  # applied, listing x; its reply is on its way
    leader.close()  # the release hands x to the rival, with the next token
    handed = backend.owner("x")
    assert handed is not None and handed.session_id == rival and handed.token == first.token + 1
    runtime.run_until(keep_alive_at + 2.5)  # the late listing of x arrives
    term = waiter.term
    assert term is None, f"B holds {term} while the backend gave x to the rival"


def test_a_child_forked_without_hooks_never_acts_on_its_parents_terms():
    world = World(SimulationConfig(seed=4, hand_over=HandOver.ON_RELEASE))
    world.episodes = []  # no fault but the fork
    world.start()
    world.advance_to(10.0)
    parent = next(p for p in world.alive if any(p.app.believed(name) for name in world.config.names))
    child = world.fork(parent)  # its first work looks at what it leads
    world.advance_to(20.0)
    world.exit(child)  # at interpreter exit: it closes its engine
    world.advance_to(40.0)
    assert world.checker.violations == [], "\n".join(map(str, world.checker.violations))


def test_a_second_acquire_let_out_by_a_stop_waiting_never_frees_the_term_held_now(runtime):
    backend = MemoryBackend(timeout=RENEW, clock=runtime.now, hand_over=True)
    engine = started_engine(runtime, backend)
    runtime.advance(0.1)
    first = engine.election("x")
    runtime.run_until_true(lambda: first.is_leader, 1)
    rival = backend.open_session(3 * LEASE, "rival").session_id
    assert backend.acquire(rival, "x", wait=True) is None
    runtime.script[CONTEND_LANE].append(Fate(lose_request=True))
    engine.submit(lambda: backend.members("workers"), lambda outcome: None)  # holds the lane for 5 s
    first.close()  # leaves x's line (queued behind the lost call), then releases: x goes to the rival
    second = engine.election("x")  # its attempt is queued too
    granted = backend.acquire(rival, "x")
    assert granted is not None
    backend.release(rival, "x", granted.token)  # x is handed to this process's session
    runtime.run_until(runtime.now() + RENEW + 1.0)  # the queued calls go out one after the other
    term = second.term
    assert term is not None and term.token == granted.token + 1
    holder = backend.owner("x")
    assert holder is not None and holder.token == term.token, f"{term} is held here, freed on the backend"


class LateLeavingBackend(MemoryBackend):
    """Applies a ``leave`` only long after its caller gave up on it (a request delayed in the network)."""

    def __init__(self, runtime: VirtualRuntime, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        self.runtime = runtime

    def _leave(self, session_id: str, group: str) -> None:
        self.runtime.call_later(2 * RENEW, lambda: super(LateLeavingBackend, self)._leave(session_id, group))
        raise BackendTimeout(f"no reply within {RENEW} s")


def test_a_leave_applied_after_its_timeout_never_undoes_a_later_join(runtime):
    backend = LateLeavingBackend(runtime, timeout=RENEW, clock=runtime.now)
    engine = started_engine(runtime, backend)
    session = engine.session_id
    engine.join("workers", session_wait=0)
    with pytest.raises(BackendTimeout):
        engine.leave("workers")  # on its way, late
    engine.join("workers", session_wait=0)
    runtime.run_until(runtime.now() + 4 * RENEW)  # the late leave lands; keep-alives go on
    assert engine.session_id == session
    assert session in {m.session_id for m in backend.members("workers")}, "joined, yet no member"
