"""Test helpers: a module's SIMBA for each of its tests, and the process's engine dropped after it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from django_simba import registry


def reset_engine() -> None:
    """``registry.reset()``, and close the backend even if the engine never started.

    ``reset()`` closes started engines only; a backend used directly (without a
    session) keeps its connections otherwise, and the test database cannot be dropped.
    """
    engine = registry.peek_engine()
    registry.reset()
    if engine is not None:
        engine.backend.close()


#: The process's engine on the in-memory backend, with short timings.
MEMORY_SIMBA = {"BACKEND": "memory", "LEASE_DURATION": 3, "RENEW_INTERVAL": 1}


def hold_elsewhere(name: str, metadata: str = "host=other") -> str:
    """Another instance (a session of its own on the process's backend) takes ``name``; its session id."""
    backend = registry.get_engine().backend
    other = backend.open_session(30, metadata).session_id
    assert backend.acquire(other, name) is not None
    return other


def fresh_engine_on(simba: dict[str, Any]) -> Any:
    """An autouse fixture for a module (``fresh_engine = fresh_engine_on(SIMBA)``).

    Each test of the module runs with ``simba`` as its SIMBA, on an engine of its own: the
    plugin closes the process's engine before and after each test, and ``reset_engine`` here
    also closes a backend used without an engine.
    """

    @pytest.fixture(autouse=True, name="fresh_engine")
    def fresh_engine() -> Iterator[None]:
        with override_settings(SIMBA=simba):
            yield
        reset_engine()

    return fresh_engine
