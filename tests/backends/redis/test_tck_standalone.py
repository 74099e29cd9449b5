"""The TCK on a single Redis node (the shared server, database 15)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.testing import BackendTCK

from .conftest import BACKEND_PATH

pytestmark = pytest.mark.redis


class TestRedisStandalone(BackendTCK):
    lease_duration = 1.0

    @pytest.fixture
    def backend(self, shared_url: str) -> Iterator[RedisBackend]:
        backend = RedisBackend({"url": shared_url}, timeout=5)
        yield backend
        backend.close()

    @pytest.fixture
    def backend_spec(self, shared_url: str) -> tuple[str, dict[str, Any]]:
        return BACKEND_PATH, {"options": {"url": shared_url}, "timeout": 5}
