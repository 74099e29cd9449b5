"""Fixtures for the engine's tests: a virtual runtime and the in-memory backend on its clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import Engine, EngineConfig, ThreadRuntime
from django_simba.testing.runtime import Fate, VirtualRuntime

LEASE = 15.0
RENEW = 5.0
DRIFT = 0.01


class FaultyRuntime(VirtualRuntime):
    """A virtual runtime whose network can be cut (every request lost) or slowed."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.cut = False
        self.delay = 0.0

    def plan(self, lane: str) -> Fate:
        if self.cut:
            return Fate(lose_request=True)
        return Fate(request_delay=self.delay / 2, reply_delay=self.delay / 2)


@pytest.fixture
def runtime() -> FaultyRuntime:
    return FaultyRuntime(seed=1, timeout=RENEW)


@pytest.fixture
def backend(runtime: FaultyRuntime) -> MemoryBackend:
    return MemoryBackend(timeout=RENEW, clock=runtime.now)


@pytest.fixture
def make_engine(backend: MemoryBackend) -> Callable[..., Engine]:
    """Engines on the shared backend, each with its own virtual runtime (a process each)."""
    made: list[Engine] = []

    def make(runtime: VirtualRuntime, **config: object) -> Engine:
        settings = {"lease_duration": LEASE, "renew_interval": RENEW, "drift": DRIFT, **config}
        engine = Engine(backend, EngineConfig(**settings), runtime)  # type: ignore[arg-type]
        made.append(engine)
        return engine

    return make


@pytest.fixture
def threaded_engine() -> Iterator[Engine]:
    """A real engine on threads over the in-memory backend, with short timings."""
    engine = Engine(
        MemoryBackend(timeout=1.0),
        EngineConfig(lease_duration=2.0, renew_interval=0.5, metadata="threaded"),
        ThreadRuntime(),
    )
    yield engine
    engine.close()


@pytest.fixture
def handing_engine(threaded_engine: Engine) -> Engine:
    """The threaded engine, told that its backend hands names over (``LeaseBackend.hands_over``).

    The in-memory backend does not: a test feeds the engine what such a backend would send.
    """
    backend = threaded_engine.backend
    backend.hands_over = True
    backend._stop_waiting = lambda session_id, name: None  # type: ignore[method-assign]
    threaded_engine.wait_for_session(5)
    return threaded_engine
