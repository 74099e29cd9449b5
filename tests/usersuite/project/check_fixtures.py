"""The plugin's fixtures for one test: the memory backend, and the engine started."""

import pytest

from django_simba import lock
from django_simba.engine import Engine


def test_simba_memory_needs_no_database(simba_memory: Engine, name: str) -> None:
    assert simba_memory.backend.vendor == "memory"
    with lock(name, timeout=5) as term:
        assert term.token == 1


@pytest.mark.django_db
def test_simba_engine_has_its_session_open(simba_engine: Engine, name: str) -> None:
    assert simba_engine.session_id is not None
    with lock(name, timeout=5) as term:
        assert term.session_id == simba_engine.session_id
