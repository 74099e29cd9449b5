"""The engine TCK on the in-memory backend (two engines share the one backend object)."""

from collections.abc import Iterator

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.testing import EngineTCK


class TestEngineOnMemory(EngineTCK):
    @pytest.fixture
    def backend(self) -> Iterator[MemoryBackend]:
        backend = MemoryBackend(timeout=5)
        yield backend
        backend.close()
