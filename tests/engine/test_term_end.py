"""How a term ends on its own (its deadline, its maximum hold) and what the backend is told then.

On a virtual clock with a scripted network, every backend call the engine makes is recorded, so a
test can say which call comes first and with which session and token: a term freed late, or under
the wrong session, ends in the same grants a moment later, and only the calls tell it apart.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import CONTEND_LANE, SESSION_LANE, Engine, EngineConfig
from django_simba.engine.term import EndReason
from django_simba.testing.runtime import Fate, VirtualRuntime

LEASE, RENEW, DRIFT = 15.0, 5.0, 0.01


class ScriptedRuntime(VirtualRuntime):
    """A virtual runtime whose network plays a script of fates per lane, then is calm."""

    def __init__(self) -> None:
        super().__init__(seed=1, timeout=RENEW)
        self.script: dict[str, deque[Fate]] = {SESSION_LANE: deque(), CONTEND_LANE: deque()}

    def plan(self, lane: str) -> Fate:
        queue = self.script.get(lane)
        return queue.popleft() if queue else Fate()


class RecordingBackend(MemoryBackend):
    """The in-memory backend, noting every acquire and release it is asked for."""

    def __init__(self, *, clock: Any, **kwargs: Any) -> None:
        super().__init__(clock=lambda: clock() + self.skew, **kwargs)
        self.skew = 0.0
        self.log: list[tuple[str, str | None, str, int | None]] = []

    def acquire(self, session_id: str, name: str, *, wait: bool = False) -> Any:
        self.log.append(("acquire", session_id, name, None))
        return super().acquire(session_id, name, wait=wait)

    def release(self, session_id: str, name: str, token: int | None = None) -> Any:
        self.log.append(("release", session_id, name, token))
        return super().release(session_id, name, token)


@pytest.fixture
def runtime() -> ScriptedRuntime:
    return ScriptedRuntime()


@pytest.fixture
def backend(runtime: ScriptedRuntime) -> RecordingBackend:
    return RecordingBackend(timeout=RENEW, clock=runtime.now)


@pytest.fixture
def engine(runtime: ScriptedRuntime, backend: RecordingBackend) -> Engine:
    engine = Engine(backend, EngineConfig(lease_duration=LEASE, renew_interval=RENEW, drift=DRIFT), runtime)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 1)
    runtime.advance(0.1)  # the calls made at opening (a purge) are done: scripts start after them
    return engine


def test_a_lapsed_term_ends_at_its_deadline_and_its_name_is_freed_under_its_session(runtime, backend, engine):
    start = runtime.now()
    lost = []
    lock = engine.lock("alpha", on_lost=lambda term, reason: lost.append(reason))
    backend.skew = 3.0  # the backend's clock is 3 s ahead while it grants: 3 s less of lease
    term = lock.acquire(0)
    backend.skew = 0.0
    runtime.script[SESSION_LANE].append(Fate(lose_request=True))  # the first keep-alive is lost
    # 11.9 s of lease granted, trusted for 11.78 s from the send time; the session lives to 14.85 s,
    # and the keep-alive sent again after the lost one leaves at 12.5 s
    before = len(backend.log)
    runtime.run_until(start + 12.0)
    assert engine.session_id == term.session_id  # the session lives on: this is the term's own end
    assert term.ended is EndReason.DEADLINE
    assert lost == [EndReason.DEADLINE]
    assert backend.log[before:] == [("release", term.session_id, "alpha", term.token)]
    assert backend.owner("alpha") is None  # free for others now, not at the next keep-alive


def test_a_maximum_hold_frees_the_name_at_once_under_the_term_session(runtime, backend, engine):
    lock = engine.lock("beta", max_hold=1.0)
    term = lock.acquire(0)
    runtime.run_until(runtime.now() + 1.0 + 0.01)
    assert term.ended is EndReason.MAX_HOLD
    assert backend.log[-1] == ("release", term.session_id, "beta", term.token)
    assert backend.owner("beta") is None  # another process may take it now, not at the next keep-alive
