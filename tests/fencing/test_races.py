"""Fenced writes racing: another transaction holding the row, and two processes with an old and a new token.

The conditional update is one statement, so whichever way the writes
interleave, a write with the old token is applied only before the first write
with the new one, never after; and two processes racing to create a row
neither duplicate it nor let the old token win.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from django_simba.backends.database import DatabaseBackend
from django_simba.fencing import Fence, StaleToken
from tests.backends.database.calls import Call, wait_blocked
from tests.backends.database.conftest import Outsider, make_backend  # noqa: F401  (a fixture)

from .conftest import each_alias
from .models import Book, Document, Shelf

pytestmark = pytest.mark.parametrize("alias", each_alias(), indirect=True)

ROOT = Path(__file__).resolve().parents[2]
ROWS = 200


def in_thread(function: Callable[[], Any]) -> Call:
    """Run ``function`` on a thread of its own (its own Django connection, closed after)."""

    def run() -> Any:
        try:
            return function()
        finally:
            connections.close_all()

    return Call(run)


@pytest.fixture
def observer(alias: str) -> Iterator[Outsider]:
    """A connection outside any transaction, to see who waits for a lock.

    Not the outsider: PostgreSQL shows a transaction the activity of other
    sessions as it was when the transaction first looked.
    """
    other = Outsider(alias)
    yield other
    other.close()


def write_behind(
    outsider: Outsider, observer: Outsider, model: type[Any], held: str, write: Callable[[], Any]
) -> Call:
    """``write`` in a thread while the outsider's uncommitted ``SET held`` holds the rows; then commit it."""
    alias = observer.alias
    outsider.begin()
    outsider.execute(f"UPDATE {connections[alias].ops.quote_name(model._meta.db_table)} SET {held}")
    ours = in_thread(write)
    wait_blocked(observer, ours)
    outsider.commit()
    return ours


@pytest.mark.parametrize("newer", [True, False], ids=["newer-commits-first", "older-commits-first"])
def test_a_write_waiting_on_the_row_compares_with_what_committed(
    tables: str, outsider: Outsider, observer: Outsider, newer: bool
) -> None:
    documents = Document.objects.using(tables)
    documents.create(key="daily", fence_token=1, fence_lease="reports:daily")
    theirs = 7 if newer else 5
    ours = write_behind(
        outsider,
        observer,
        Document,
        f"fence_token = {theirs}, body = 'theirs'",
        lambda: documents.filter(key="daily").fenced_update(Fence("reports:daily", 6), body="ours"),
    )
    if newer:
        with pytest.raises(StaleToken):
            ours.result()
    else:
        assert ours.result() == 1
    row = documents.get(key="daily")
    assert (row.body, row.fence_token) == (("theirs", 7) if newer else ("ours", 6))


def test_rows_named_through_a_relation_are_compared_with_what_committed(
    tables: str, outsider: Outsider, observer: Outsider
) -> None:
    """The fence check stays on the written row even when the filter needs a join."""
    shelf = Shelf.objects.using(tables).create(label="new")
    books = Book.objects.using(tables)
    books.create(shelf=shelf, title="t", fence_token=1, fence_lease="books")
    ours = write_behind(
        outsider,
        observer,
        Book,
        "fence_token = 7, title = 'theirs'",
        lambda: books.on_shelf("new").fenced_update(Fence("books", 6), title="ours"),
    )
    with pytest.raises(StaleToken):
        ours.result()
    book = books.get()
    assert (book.title, book.fence_token) == ("theirs", 7)


@pytest.fixture
def tokens(make_backend: Callable[..., DatabaseBackend]) -> Iterator[tuple[int, int]]:  # noqa: F811
    """An old and a new token of one lease: a term, then the term of the session that took it over."""
    backend = make_backend()
    old_holder = backend.open_session(30, "old holder").session_id
    new_holder = backend.open_session(30, "new holder").session_id
    old = backend.acquire(old_holder, "race:doc")
    assert old is not None and backend.force_release("race:doc")
    new = backend.acquire(new_holder, "race:doc")
    assert new is not None and new.token > old.token
    yield old.token, new.token
    for session in (old_holder, new_holder):
        backend.close_session(session)


def race(alias: str, mode: str, tokens: tuple[int, int]) -> dict[str, Counter[str]]:
    """A writer with the old token (A) and one with the new (B), sent to every row at the same moment."""
    settings = connections[alias].settings_dict
    database = {
        key: settings[key] for key in ("ENGINE", "NAME", "USER", "PASSWORD", "HOST", "PORT", "OPTIONS")
    }
    writers = {}
    for letter, token in zip("AB", tokens):
        config = {"database": database, "lease": "race:doc", "token": token, "letter": letter}
        writers[letter] = subprocess.Popen(
            [sys.executable, "-m", "tests.fencing.racer", json.dumps({**config, "mode": mode, "key": "doc"})],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
    try:
        for writer in writers.values():
            assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
        outcomes = {letter: Counter[str]() for letter in writers}
        for index in range(ROWS):
            # Who is told first alternates, so each writer is sometimes the one a little ahead.
            for writer in list(writers.values())[:: 1 if index % 2 else -1]:
                assert writer.stdin is not None
                writer.stdin.write(f"{index}\n")
                writer.stdin.flush()
            for letter, writer in writers.items():
                assert writer.stdout is not None
                outcomes[letter][writer.stdout.readline().strip()] += 1
        for letter, writer in writers.items():
            writer.communicate(timeout=30)
            assert writer.returncode == 0, f"writer {letter} failed"
        return outcomes
    finally:
        for writer in writers.values():
            if writer.poll() is None:
                writer.kill()
                writer.wait()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["update", "upsert"])
def test_two_processes_with_an_old_and_a_new_token(tables: str, tokens: tuple[int, int], mode: str) -> None:
    documents = Document.objects.using(tables)
    if mode == "update":
        documents.bulk_create(Document(key=f"doc{index}") for index in range(ROWS))
    outcomes = race(tables, mode, tokens)
    histories = dict(documents.values_list("key", "history"))
    assert sorted(histories) == sorted(f"doc{index}" for index in range(ROWS))  # none twice, none lost
    # A row's history is the order of its applied writes: the old token never wrote after the new one.
    assert set(histories.values()) <= {"B", "AB"}, histories
    assert outcomes["B"] == {"accepted": ROWS}
    assert outcomes["A"]["accepted"] == sum(history == "AB" for history in histories.values())
    assert outcomes["A"]["accepted"] + outcomes["A"]["refused"] == ROWS
    assert set(documents.values_list("fence_token", flat=True)) == {tokens[1]}
