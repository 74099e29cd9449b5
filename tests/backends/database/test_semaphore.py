"""The semaphore TCK on PostgreSQL (NOTIFY wakes the waiters), MariaDB and SQLite (polled).

Each engine has a backend of its own; the other processes configure Django themselves and
point the alias at this run's test database.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_simba.testing import SemaphoreTCK

from .conftest import BackendEach, each_alias
from .factory import spec_for


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
class TestSemaphoresOnDatabases(BackendEach, SemaphoreTCK):
    @pytest.fixture
    def backend_spec(self, alias: str) -> tuple[str, dict[str, Any]]:
        return spec_for(alias)
