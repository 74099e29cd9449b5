"""Test helper: drop the process's engine and close its backend's connections."""

from __future__ import annotations

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
