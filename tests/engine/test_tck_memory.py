"""The TCK on the in-memory backend (the reference implementation of the contract)."""

from collections.abc import Iterator

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.testing import BackendTCK


class TestMemoryBackend(BackendTCK):
    lease_duration = 0.3

    @pytest.fixture
    def backend(self) -> Iterator[MemoryBackend]:
        backend = MemoryBackend(timeout=5)
        yield backend
        backend.close()
