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
