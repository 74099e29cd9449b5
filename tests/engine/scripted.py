"""A virtual clock with a scripted network, and a backend that records the calls it is asked for.

The engine's tests that pin down which backend call comes when (``test_term_end``,
``test_grant_path``) run on these.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import CONTEND_LANE, SESSION_LANE
from django_simba.testing.runtime import Fate, VirtualRuntime

LEASE, RENEW, DRIFT = 15.0, 5.0, 0.01


class ScriptedRuntime(VirtualRuntime):
    """A virtual runtime whose network plays a script of fates per lane, then is calm."""

    def __init__(self) -> None:
        super().__init__(seed=1, timeout=RENEW)
        self.script: dict[str, deque[Fate]] = {SESSION_LANE: deque(), CONTEND_LANE: deque()}
        self.session_lane_cut = False  # every open and keep-alive lost

    def plan(self, lane: str) -> Fate:
        if lane == SESSION_LANE and self.session_lane_cut:
            return Fate(lose_request=True)
        queue = self.script.get(lane)
        return queue.popleft() if queue else Fate()

    def submit(self, lane: str, call: Any, on_done: Any) -> None:
        # strict: the engine's calls go on its two lanes, each with a callback for its outcome
        assert lane in (SESSION_LANE, CONTEND_LANE), lane
        assert callable(on_done), on_done
        super().submit(lane, call, on_done)


@pytest.fixture(name="runtime")
def scripted_runtime() -> ScriptedRuntime:
    """The ``runtime`` of a test module that imports this fixture: the scripted one."""
    return ScriptedRuntime()


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

    def close_session(self, session_id: str) -> None:
        self.log.append(("close_session", session_id, "", None))
        super().close_session(session_id)

    def watch_lease(self, name: str) -> None:
        self.log.append(("watch", None, name, None))
        super().watch_lease(name)

    def unwatch_lease(self, name: str) -> None:
        self.log.append(("unwatch", None, name, None))
        super().unwatch_lease(name)
