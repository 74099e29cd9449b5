"""A busy process keeps its session on PostgreSQL, MariaDB and SQLite (see ``tests/busy_process.py``).

With the default pool (``max_connections`` 2) sixteen threads keep every connection busy;
the keep-alive must not wait behind them, nor behind them for SQLite's per-process turn.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from django_simba.backends.database import DatabaseBackend
from tests.busy_process import run_busy_process

from .conftest import each_alias


@pytest.mark.slow
@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_sixteen_busy_threads_lose_no_term_on_the_default_pool(
    make_backend: Callable[..., DatabaseBackend],
) -> None:
    run = run_busy_process(make_backend())
    print(run.summary())
    run.assert_kept()
