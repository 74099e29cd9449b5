"""The TCK on Redis under Sentinel: a primary, a replica and three Sentinels of the tests' own."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.testing import BackendTCK
from tests.conftest import server_missing
from tests.servers.redis_cluster import REDIS_SERVER
from tests.servers.redis_sentinel import SentinelSet, redis_sentinel

from .conftest import BACKEND_PATH

pytestmark = pytest.mark.redis


@pytest.fixture(scope="module")
def sentinel_options() -> Iterator[dict[str, Any]]:
    if not shutil.which(REDIS_SERVER):
        server_missing(f"{REDIS_SERVER} (to start Redis servers and Sentinels of the tests' own)")
    servers: SentinelSet
    with redis_sentinel() as servers:
        yield {"sentinels": servers.addresses, "service": servers.service}


class TestRedisSentinel(BackendTCK):
    lease_duration = 1.0

    @pytest.fixture
    def backend(self, sentinel_options: dict[str, Any]) -> Iterator[RedisBackend]:
        backend = RedisBackend(sentinel_options, timeout=5)
        yield backend
        backend.close()

    @pytest.fixture
    def backend_spec(self, sentinel_options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return BACKEND_PATH, {"options": sentinel_options, "timeout": 5}
