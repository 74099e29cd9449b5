"""A stale holder's fenced write inside a REPEATABLE READ transaction that has already read the row.

The transaction's reads see its snapshot, taken at its first read; a newer term commits a write
of the row after that. MariaDB's UPDATE reads the latest committed row and is refused, while a
plain SELECT of the same transaction still sees the older token: the refusal must still raise
``StaleToken``, never look like "no such row" (0), or a caller that creates the row on 0 would
then write as a stale holder. PostgreSQL refuses the UPDATE itself with a serialization failure;
a retry in a new transaction then raises ``StaleToken``. SQLite lets no other connection commit
while a transaction reads, so the case cannot arise there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import OperationalError, connections, transaction

from django_simba.fencing import Fence, StaleToken, fenced_update, fenced_upsert
from django_simba.fencing.updates import afenced_update, afenced_upsert
from tests.backends.database.conftest import on

from .models import Document

DAILY = "reports:daily"
#: What ``OPTIONS["isolation_level"]`` takes on each (on PostgreSQL, psycopg's ``IsolationLevel``).
REPEATABLE_READ = {"mysql": "repeatable read", "postgresql": "REPEATABLE_READ"}

pytestmark = pytest.mark.parametrize(
    "alias", [pytest.param(alias, marks=on(alias), id=alias) for alias in REPEATABLE_READ], indirect=True
)


@pytest.fixture
def repeatable_read(tables: str) -> Iterator[str]:
    """The test's alias with ``OPTIONS["isolation_level"]`` set to repeatable read, as a site sets it."""
    settings = connections.settings[tables]  # the dict Django's connections read their settings from
    options = settings.setdefault("OPTIONS", {})
    connections[tables].close()
    level: Any = REPEATABLE_READ[tables]
    if tables == "postgresql":
        from psycopg import IsolationLevel  # the driver of the test-integration extra only

        level = IsolationLevel[level]
    options["isolation_level"] = level
    try:
        yield tables
    finally:
        connections[tables].close()
        del options["isolation_level"]


def in_another_thread(work: Callable[[], object]) -> None:
    """Run ``work`` on another thread: another connection, committed before this returns."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:  # reported to the test
            failed.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive() and not failed, failed


def newer_term_writes(alias: str) -> None:
    rows = Document.objects.using(alias).filter(key="daily")
    in_another_thread(lambda: fenced_update(rows, Fence(DAILY, 6), body="term 6"))


def serialization_failure(error: object) -> bool:
    return isinstance(error, OperationalError) and "could not serialize access" in str(error)


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(
            lambda rows: fenced_update(rows.filter(key="daily"), Fence(DAILY, 5), body="term 5, late"),
            id="update",
        ),
        pytest.param(
            lambda rows: async_to_sync(afenced_update)(
                rows.filter(key="daily"), Fence(DAILY, 5), body="term 5, late"
            ),
            id="aupdate",
        ),
        pytest.param(
            lambda rows: fenced_upsert(rows, Fence(DAILY, 5), key="daily", defaults={"body": "term 5, late"}),
            id="upsert",
        ),
        pytest.param(
            lambda rows: async_to_sync(afenced_upsert)(
                rows, Fence(DAILY, 5), key="daily", defaults={"body": "term 5, late"}
            ),
            id="aupsert",
        ),
    ],
)
def test_a_refusal_in_a_transaction_that_read_the_row_before_a_newer_write_is_reported(
    repeatable_read: str, write: Callable[[Any], object]
) -> None:
    documents = Document.objects.using(repeatable_read)
    documents.create(key="daily")
    fenced_update(documents.filter(key="daily"), Fence(DAILY, 5), body="term 5")
    outcome: object = None
    try:
        with transaction.atomic(using=repeatable_read):
            assert documents.get(key="daily").fence_token == 5  # the snapshot is taken here
            newer_term_writes(repeatable_read)
            assert documents.get(key="daily").fence_token == 5  # and still shows the older token
            outcome = write(documents)
    except (StaleToken, OperationalError) as error:
        outcome = error
    if serialization_failure(outcome):  # PostgreSQL: the UPDATE itself is refused; a retry says why
        assert connections[repeatable_read].vendor == "postgresql"
        with pytest.raises(StaleToken), transaction.atomic(using=repeatable_read):
            write(documents)
    else:
        assert isinstance(outcome, StaleToken), f"the refused write returned {outcome!r}"
        assert (outcome.token, outcome.newer) == (5, 6)
    row = documents.get(key="daily")
    assert (row.body, row.fence_token) == ("term 6", 6)


def test_a_row_a_newer_term_created_after_the_snapshot_refuses_the_write(repeatable_read: str) -> None:
    """MariaDB's UPDATE sees the row, the snapshot does not: the locking read finds it, and says
    why. On PostgreSQL the snapshot is what the UPDATE reads too: no row, as documented."""
    documents = Document.objects.using(repeatable_read)
    documents.create(key="other")
    with transaction.atomic(using=repeatable_read):
        assert not documents.filter(key="daily").exists()  # the snapshot is taken here
        in_another_thread(lambda: fenced_upsert(documents, Fence(DAILY, 6), key="daily"))
        if connections[repeatable_read].vendor == "mysql":
            with pytest.raises(StaleToken) as refused:
                fenced_update(documents.filter(key="daily"), Fence(DAILY, 5), body="term 5, late")
            assert refused.value.newer == 6
        else:
            assert fenced_update(documents.filter(key="daily"), Fence(DAILY, 5), body="late") == 0
    assert documents.get(key="daily").fence_token == 6
