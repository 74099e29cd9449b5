"""SQLite next to the application's own transactions.

SQLite lets one connection write at a time. The documented setup keeps django-simba's tables
in a file of their own (an alias, ``SIMBA["OPTIONS"]["alias"]`` and the router), so the
application's write transactions, however long, never stand in a lease's way: each case below
passes with the journal in WAL mode and in the default (rollback) mode. With the tables in the
same file as the transaction, a call from inside a transaction that holds the file's lock fails
at once, saying how to fix it, where it used to wait for the transaction that waited for it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections, transaction
from django.test import override_settings

from django_simba import lock, owner, registry
from django_simba.backends.database import AnyDatabaseBackend
from django_simba.engine import Term
from django_simba.spi import ConfigurationError
from django_simba.testing import wait_until

from .conftest import Rollback, on

pytestmark = on("sqlite")

LEASE = 2.0  # a loaded machine (CI runs six workers on two cores) delays a keep-alive by 0.6 s
SIMBA = {
    "BACKEND": "database",
    "OPTIONS": {"alias": "sqlite"},
    "LEASE_DURATION": LEASE,
    "RENEW_INTERVAL": LEASE / 4,
    "METADATA": "sqlite-transactions",
}
#: A call that waited on SQLite's lock would fail after TIMEOUT; a hang is caught after DEADLINE.
DEADLINE = 20.0


def name() -> str:
    return f"sqlite.tx.{uuid.uuid4().hex[:8]}"


class UsersDatabase:
    """The application's database, in a SQLite file of its own, and one of its connections.

    Its transactions are SQLite's own (``BEGIN IMMEDIATE`` takes the write lock at once), as
    an ``atomic()`` block's are from its first write on.
    """

    def __init__(self, path: Path, journal: str) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        (mode,) = self.connection.execute(f"PRAGMA journal_mode={journal}").fetchone()
        assert mode == journal
        self.connection.execute("CREATE TABLE invoice (id INTEGER PRIMARY KEY, total INTEGER)")

    @contextlib.contextmanager
    def write_transaction(self) -> Iterator[None]:
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            self.connection.execute("INSERT INTO invoice (total) VALUES (42)")
            yield
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")


@pytest.fixture(params=["wal", "delete"])
def users(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UsersDatabase]:
    database = UsersDatabase(tmp_path / "app.sqlite3", request.param)
    yield database
    database.connection.close()


@pytest.fixture
def simba() -> Iterator[None]:
    """The public API on the database backend, its tables on the "sqlite" alias."""
    with override_settings(SIMBA=SIMBA):
        yield
        registry.reset()


def write(alias: str) -> None:
    """A write of the application's through Django: from here its transaction holds the write lock."""
    with connections[alias].cursor() as cursor:
        cursor.execute("INSERT INTO invoice (total) VALUES (42)")


def in_thread(work: Any) -> Any:
    """Run ``work`` in a thread and return its result; a call that hangs fails the test."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(("value", work()))
        except BaseException as error:
            outcome.append(("error", error))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    assert not thread.is_alive(), f"the call did not return within {DEADLINE} s"
    kind, value = outcome[0]
    if kind == "error":
        raise value
    return value


# -- the documented setup: the tables in a file of their own -------------------------------------


def test_a_lock_with_a_timeout_inside_a_write_transaction(users: UsersDatabase, simba: None) -> None:
    with users.write_transaction(), lock(name(), timeout=5) as term:
        assert term.is_valid() and term.token >= 1


def test_a_lock_without_timeout_inside_a_write_transaction(users: UsersDatabase, simba: None) -> None:
    def work() -> int:
        with users.write_transaction(), lock(name(), timeout=None) as term:
            return term.token

    assert in_thread(work) >= 1


def test_a_release_inside_the_write_transaction_frees_the_name(users: UsersDatabase, simba: None) -> None:
    lease = name()
    with users.write_transaction():
        held = lock(lease, timeout=5)
        term = held.acquire()
        held.release()
        assert not term.is_valid()
        assert owner(lease) is None  # freed on the backend, not only here


def test_owner_inside_the_write_transaction(users: UsersDatabase, simba: None) -> None:
    lease = name()
    with lock(lease, timeout=5) as term, users.write_transaction():
        info = owner(lease)
        assert info is not None and info.token == term.token


def test_a_write_transaction_longer_than_the_lease_ends_no_term(users: UsersDatabase, simba: None) -> None:
    engine = registry.get_engine()
    with lock(name(), timeout=5) as term:
        session = engine.session_id
        with users.write_transaction():
            began = time.monotonic()
            # The transaction stays open (the write lock held) for three leases.
            wait_until(
                lambda: not term.is_valid() or time.monotonic() - began > 3 * LEASE,
                3 * LEASE + DEADLINE,
                message="three leases",
            )
            assert term.is_valid()
        assert term.is_valid()
        assert engine.session_id == session


def test_a_rolled_back_transaction_keeps_the_lock_taken_in_it(users: UsersDatabase, simba: None) -> None:
    lease = name()
    taken: list[Term] = []

    def lock_then_fail() -> None:
        with users.write_transaction():
            taken.append(lock(lease, timeout=5).acquire())
            raise Rollback

    with pytest.raises(Rollback):
        lock_then_fail()
    (term,) = taken
    info = owner(lease)
    assert info is not None and info.token == term.token


# -- the tables in the file of the transaction: an immediate, clear error ------------------------


@pytest.fixture
def shared_file() -> Iterator[str]:
    """A table of the application's in the very file of django-simba's tables."""
    with connections["sqlite"].cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS invoice (id INTEGER PRIMARY KEY, total INTEGER)")
    yield "sqlite"
    with connections["sqlite"].cursor() as cursor:
        cursor.execute("DROP TABLE invoice")


def test_inside_a_transaction_on_the_tables_file_calls_fail_at_once(shared_file: str, simba: None) -> None:
    registry.get_engine().wait_for_session(10)  # opened outside the transaction
    with transaction.atomic(using=shared_file):
        write(shared_file)
        assert owner(name()) is None  # a read: SQLite lets it by the transaction's write lock
        with pytest.raises(ConfigurationError, match="SQLite file of their own") as raised:
            lock(name(), timeout=0).acquire()
        assert "django_simba.routers.SimbaRouter" in str(raised.value)
        # A blocking acquire says why at once too: no retry could succeed inside this transaction.
        started = time.monotonic()
        with pytest.raises(ConfigurationError, match="SQLite file of their own"):
            lock(name(), timeout=None).acquire()
        assert time.monotonic() - started < 5  # not a wait for ever


def test_a_release_inside_a_transaction_on_the_tables_file_returns_at_once(
    shared_file: str, simba: None
) -> None:
    lease = name()
    held = lock(lease, timeout=5)
    term = held.acquire()
    with transaction.atomic(using=shared_file):
        write(shared_file)
        held.release()  # the backend's release fails at once; the term ends here
        assert not term.is_valid()
    # The next keep-alive still lists the name as ours, and frees it.
    wait_until(lambda: owner(lease) is None, 10 * LEASE, message="the name freed by the keep-alive")


def test_inside_a_transaction_on_the_tables_file_that_holds_no_lock_calls_work(
    shared_file: str, simba: None
) -> None:
    # As in a view under ATOMIC_REQUESTS that has not written yet.
    with transaction.atomic(using=shared_file), lock(name(), timeout=5) as term:
        info = owner(term.name)
        assert info is not None and info.token == term.token


def test_a_lock_without_timeout_inside_a_transaction_that_wrote_fails_at_once_without_a_session(
    shared_file: str, simba: None
) -> None:
    """The session is still to be opened: the keep-alive thread could not open it while this
    transaction holds the lock, and the caller would wait for it for ever."""

    def work() -> None:
        with transaction.atomic(using=shared_file):
            write(shared_file)
            assert registry.get_engine().session_id is None
            lock(name(), timeout=None).acquire()

    with pytest.raises(ConfigurationError, match="SQLite file of their own"):
        in_thread(work)


def test_a_lock_without_timeout_inside_a_transaction_that_wrote_fails_at_once_once_the_session_is_lost(
    shared_file: str, simba: None
) -> None:
    """The transaction outlived the session (its renewals waited for the transaction): the new
    session would wait for the transaction too."""
    engine = registry.get_engine()
    engine.wait_for_session(10)

    def work() -> None:
        with transaction.atomic(using=shared_file):
            write(shared_file)
            wait_until(lambda: engine.session_id is None, 10 * LEASE, message="the session lost")
            lock(name(), timeout=None).acquire()

    with pytest.raises(ConfigurationError, match="SQLite file of their own"):
        in_thread(work)


def test_inside_a_transaction_that_read_the_file_in_the_rollback_journal_mode_a_lock_fails_at_once(
    shared_file: str, simba: None
) -> None:
    """Its read lock keeps any writer from committing until it ends (WAL would not)."""
    registry.get_engine().wait_for_session(10)

    def work() -> None:
        with transaction.atomic(using=shared_file):
            with connections[shared_file].cursor() as cursor:
                (mode,) = cursor.execute("PRAGMA journal_mode").fetchone()
                assert mode == "delete"
                cursor.execute("SELECT count(*) FROM invoice").fetchone()
            lock(name(), timeout=None).acquire()

    with pytest.raises(ConfigurationError, match="SQLite file of their own"):
        in_thread(work)


def test_where_sqlite_cannot_be_asked_an_open_transaction_is_suspected(
    shared_file: str, simba: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without sqlite3_txn_state (another Python, a library that hides it), a call waits briefly
    for the lock and then blames the transaction; it never waits for itself."""
    from django_simba.backends.database import sqlite

    monkeypatch.setattr(sqlite, "transaction_state", lambda raw: None)
    registry.get_engine().wait_for_session(10)

    def work() -> None:
        with transaction.atomic(using=shared_file):
            write(shared_file)
            lock(name(), timeout=None).acquire()

    with pytest.raises(ConfigurationError, match="SQLite file of their own"):
        in_thread(work)


class OtherWriter:
    """Another process that holds the SQLite file's write lock for a second, then commits."""

    HOLD = 1.0

    def __init__(self, path: str) -> None:
        script = (
            "import sqlite3, sys, time\n"
            "connection = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "connection.execute('BEGIN IMMEDIATE')\n"
            "print('held', flush=True)\n"
            f"time.sleep({self.HOLD})\n"
            "connection.execute('COMMIT')\n"
            "print('released', flush=True)\n"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", script, path], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "held"

    def finish(self) -> str:
        out, _ = self.process.communicate(timeout=DEADLINE)
        return out


def test_inside_a_transaction_that_wrote_nothing_a_lock_waits_for_another_process(
    shared_file: str, simba: None
) -> None:
    """Another process's write lock is not this thread's transaction: the lock waits for it."""
    registry.get_engine().wait_for_session(10)
    path = connections[shared_file].settings_dict["NAME"]
    with transaction.atomic(using=shared_file):
        other = OtherWriter(str(path))
        try:
            with lock(name(), timeout=5) as term:
                assert term.is_valid()
        finally:
            released = other.finish()
    assert released.strip() == "released"


def test_outside_any_transaction_the_shared_file_works(shared_file: str) -> None:
    backend = AnyDatabaseBackend.build({"alias": "sqlite"}, timeout=5)
    try:
        write(shared_file)  # autocommit: no transaction left open
        session = backend.open_session(30, "shared").session_id
        assert backend.acquire(session, name()) is not None
    finally:
        backend.close()
