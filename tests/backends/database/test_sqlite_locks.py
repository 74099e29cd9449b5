"""What SQLite says an SQLite connection's transaction holds (``sqlite3_txn_state``)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from django_simba.backends.database.sqlite_locks import TransactionState, transaction_state

from .conftest import on

pytestmark = on("sqlite")


@pytest.fixture(params=["file", "wal", "memory"])
def connection(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sqlite3.Connection]:
    if request.param == "memory":  # pytest-django's kind of in-memory test database
        raw = sqlite3.connect(f"file:locks_{uuid.uuid4().hex}?mode=memory&cache=shared", uri=True)
    else:
        raw = sqlite3.connect(tmp_path / "locks.sqlite3")
        if request.param == "wal":
            raw.execute("PRAGMA journal_mode=wal")
    raw.isolation_level = None
    raw.execute("CREATE TABLE invoice (total INTEGER)")
    yield raw
    raw.close()


def test_a_deferred_transaction_holds_nothing_until_it_reads_then_writes(
    connection: sqlite3.Connection,
) -> None:
    assert transaction_state(connection) is TransactionState.NONE
    connection.execute("BEGIN")  # what atomic() sends
    assert connection.in_transaction and transaction_state(connection) is TransactionState.NONE
    connection.execute("SELECT * FROM invoice").fetchall()
    assert transaction_state(connection) is TransactionState.READ
    connection.execute("INSERT INTO invoice VALUES (42)")
    assert transaction_state(connection) is TransactionState.WRITE
    connection.execute("ROLLBACK")
    assert transaction_state(connection) is TransactionState.NONE


def test_an_immediate_transaction_holds_the_write_lock_before_it_writes(
    connection: sqlite3.Connection,
) -> None:
    connection.execute("BEGIN IMMEDIATE")
    assert transaction_state(connection) is TransactionState.WRITE
    connection.execute("ROLLBACK")


def test_each_connection_answers_for_its_own_transaction(tmp_path: Path) -> None:
    writer = sqlite3.connect(tmp_path / "two.sqlite3", isolation_level=None)
    other = sqlite3.connect(tmp_path / "two.sqlite3", isolation_level=None)
    try:
        writer.execute("CREATE TABLE invoice (total INTEGER)")
        writer.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN")
        assert transaction_state(writer) is TransactionState.WRITE
        assert transaction_state(other) is TransactionState.NONE
    finally:
        writer.close()
        other.close()
