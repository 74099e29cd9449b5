"""SQLite 3.35+: its SQL and its backend. One writer at a time, so writes serialize without row locks.

Writes that span statements run in ``BEGIN IMMEDIATE`` transactions, which take
the write lock up front (no lock upgrade that could fail half-way). Names are
compared with ``BINARY``; ``LIKE`` is case-insensitive in SQLite, so prefixes are
ranges. There are no round trips: the counts are library calls.

A statement that finds the database locked is retried after a pause of a
fraction of a millisecond to two milliseconds, until the call's timeout. SQLite's
own busy handler sleeps longer and longer (up to 100 ms a time), and its file
lock has no queue: a process that found it taken a few times then looks so
rarely that the processes cycling the lock keep it, and it starves.
"""

from __future__ import annotations

import functools
import os
import random
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, router
from django.db.utils import load_backend

from ...routers import SimbaRouter
from ...spi import DEFAULT_TIMEOUT, BackendTimeout, ConfigurationError, format_duration
from ...spi.patience import patience
from .backend import DatabaseBackend
from .dialect import (
    Executor,
    Params,
    Removed,
    Result,
    StatementDialect,
    Statements,
    Traffic,
)
from .options import DatabaseOptions
from .slots import Slots
from .sqlite_locks import TransactionState, transaction_state

T = TypeVar("T")

# julianday('now') is fixed for one sqlite3_step; a write does all its work in its first
# step. Reads that return many rows take it once from a materialized CTE.
NOW = "CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
CLOCK = f"clock(now) AS MATERIALIZED (SELECT {NOW})"

# A name's first token: above every token of a row the purge reclaimed.
FIRST_TOKEN = "COALESCE((SELECT floor FROM simba_reclaim WHERE id = 1), 0) + 1"

# The purge's reclaim, in one write transaction: a floor raised long enough ago (``settle``)
# becomes the settled one and the floor rises over the tokens of the rows idle now; rows idle
# with tokens at or below the settled floor go, oldest first. Every statement that makes a
# row read the floor when it began: one that began before the floor rose cannot still be
# running a settle later.
IDLE = f"session_id = '' AND freed_at <= {NOW} - :idle"
ANY_IDLE = f"SELECT EXISTS (SELECT 1 FROM simba_lease WHERE {IDLE})"
TOP = f"COALESCE((SELECT max(token) FROM simba_lease WHERE {IDLE}), 0)"
RECLAIM = [
    "INSERT INTO simba_reclaim (id, floor, settled, raised_at) VALUES (1, 0, 0, 0) ON CONFLICT DO NOTHING",
    f"""
UPDATE simba_reclaim SET settled = floor, floor = max(floor, {TOP}),
    raised_at = CASE WHEN {TOP} > floor THEN {NOW} ELSE raised_at END
WHERE id = 1 AND raised_at <= {NOW} - :settle
""",
    f"""
DELETE FROM simba_lease WHERE name IN (
    SELECT name FROM simba_lease WHERE {IDLE} AND token <= (SELECT settled FROM simba_reclaim WHERE id = 1)
    ORDER BY freed_at LIMIT :limit
)
""",
]

OPEN_SESSION = f"""
INSERT INTO simba_session (session_id, expires_at, metadata) VALUES (:sid, {NOW} + :lease, :metadata)
"""

RENEW = f"UPDATE simba_session SET expires_at = {NOW} + :lease WHERE session_id = :sid AND expires_at > {NOW}"
OWNED = "SELECT name, token FROM simba_lease WHERE session_id = :sid"

# One upsert: a new name is inserted only for a live caller, above the reclaim floor; an existing
# row is taken when free or held by a session that is not live. SET reads the row's previous values.
TAKE = f"""
INSERT INTO simba_lease (name, session_id, token)
SELECT :name, :sid, {FIRST_TOKEN} WHERE EXISTS (
    SELECT 1 FROM simba_session WHERE session_id = :sid AND expires_at > {NOW}
)
ON CONFLICT (name) DO UPDATE SET token = token + 1, session_id = excluded.session_id
WHERE simba_lease.session_id <> excluded.session_id
  AND NOT EXISTS (
    SELECT 1 FROM simba_session holder
    WHERE holder.session_id = simba_lease.session_id AND holder.expires_at > {NOW}
  )
"""
TAKEN = f"""
SELECT (SELECT expires_at - {NOW} FROM simba_session WHERE session_id = :sid AND expires_at > {NOW}),
       (SELECT token FROM simba_lease WHERE name = :name AND session_id = :sid)
"""

# In the take's transaction: set when the holder is another session (a refusal).
MARK_WANTED = "UPDATE simba_lease SET wanted = (session_id <> :sid) WHERE name = :name AND session_id <> ''"

RELEASE = (
    f"UPDATE simba_lease SET session_id = '', freed_at = {NOW} WHERE name = :name AND session_id = :sid"
    " AND (:token = 0 OR token = :token)"
)
WANTED = "SELECT wanted FROM simba_lease WHERE name = :name"

HOLDER = f"""
SELECT EXISTS (
    SELECT 1 FROM simba_session s WHERE s.session_id = l.session_id AND s.expires_at > {NOW}
)
FROM simba_lease l WHERE l.name = :name AND l.session_id <> ''
"""
FREE_SESSIONS_LEASES = f"UPDATE simba_lease SET session_id = '', freed_at = {NOW}"
FREE_LEASE = f"{FREE_SESSIONS_LEASES} WHERE name = :name"

EXPIRED = f"""
SELECT session_id FROM simba_session WHERE expires_at <= {NOW} ORDER BY expires_at LIMIT :limit
"""

SESSIONS = f"WITH {CLOCK} SELECT session_id, expires_at - clock.now, metadata FROM simba_session, clock"

OWNER = f"""
WITH {CLOCK}
SELECT l.session_id, l.token, s.expires_at - clock.now, s.metadata
FROM simba_lease l JOIN simba_session s ON s.session_id = l.session_id, clock
WHERE l.name = :name AND s.expires_at > clock.now
"""

LEASES = f"""
WITH {CLOCK}
SELECT l.name, l.session_id, l.token, s.expires_at - clock.now, s.metadata
FROM simba_lease l JOIN simba_session s ON s.session_id = l.session_id, clock
WHERE l.name >= :low AND l.name < :high AND s.expires_at > clock.now
"""

ADD_MEMBER = f"""
INSERT INTO simba_member (group_name, session_id)
SELECT :group, session_id FROM simba_session WHERE session_id = :sid AND expires_at > {NOW}
ON CONFLICT DO NOTHING
"""
LIVE = f"SELECT 1 FROM simba_session WHERE session_id = :sid AND expires_at > {NOW}"
LEAVE = "DELETE FROM simba_member WHERE group_name = :group AND session_id = :sid"

MEMBERS = f"""
WITH {CLOCK}
SELECT m.session_id, s.metadata
FROM simba_member m JOIN simba_session s ON s.session_id = m.session_id, clock
WHERE m.group_name = :group AND s.expires_at > clock.now
"""

GROUPS = f"""
WITH {CLOCK}
SELECT m.group_name, m.session_id, s.metadata
FROM simba_member m JOIN simba_session s ON s.session_id = m.session_id, clock
WHERE m.group_name >= :low AND m.group_name < :high AND s.expires_at > clock.now
"""


#: Pauses between tries of a statement that found the database locked: first, growth, last.
FIRST_PAUSE = 0.0002
PAUSE_GROWTH = 1.5
LAST_PAUSE = 0.002


def locked(error: BaseException) -> bool:
    """SQLite refused for a lock another connection holds (a file lock, or a shared cache's table lock)."""
    return isinstance(error, sqlite3.OperationalError) and "locked" in str(error)


class SqliteExecutor(Executor):
    def __init__(self, raw: Any, traffic: Traffic, lock_wait: float) -> None:
        super().__init__(raw, traffic)
        self.lock_wait = lock_wait

    def _one(self, sql: str, params: Params, deadline: float) -> Result:
        self.traffic.count(1)
        pause = FIRST_PAUSE
        while True:
            try:
                cursor = self.raw.execute(sql, params)
                break
            except sqlite3.OperationalError as error:
                # Nothing was done: a locked BEGIN started no transaction, a locked COMMIT stays to retry.
                if not locked(error) or time.monotonic() >= deadline:
                    raise
            time.sleep(pause * random.uniform(0.5, 1.5))
            pause = min(pause * PAUSE_GROWTH, LAST_PAUSE)
        try:
            rows = cursor.fetchall()
            return Result(rows, cursor.rowcount)
        finally:
            cursor.close()

    def run(self, sql: str, params: Params) -> Result:
        return self._one(sql, params, time.monotonic() + self.lock_wait)

    def run_batch(self, statements: Sequence[str], params: Params, *, atomic: bool) -> list[Result]:
        deadline = time.monotonic() + self.lock_wait
        if not atomic:
            return [self._one(sql, params, deadline) for sql in statements]
        self._one("BEGIN IMMEDIATE", {}, deadline)
        try:
            results = [self._one(sql, params, deadline) for sql in statements]
            self._one("COMMIT", {}, deadline)
        except BaseException:
            if self.raw.in_transaction:
                self.raw.execute("ROLLBACK")
            raise
        return results


def id_list(session_ids: Sequence[str]) -> tuple[str, dict[str, str]]:
    """Placeholders and parameters for ``IN (...)``."""
    params = {f"id{i}": sid for i, sid in enumerate(session_ids)}
    return ", ".join(f":{key}" for key in params), params


class SqliteDialect(StatementDialect):
    vendor = "sqlite"
    reclaim = RECLAIM
    any_idle = ANY_IDLE
    sql = Statements(
        open_session=OPEN_SESSION,
        renew=RENEW,
        owned=OWNED,
        expired=EXPIRED,
        sessions=SESSIONS,
        take=TAKE,
        mark_wanted=MARK_WANTED,
        taken=TAKEN,
        holder=HOLDER,
        free_lease=FREE_LEASE,
        owner=OWNER,
        leases=LEASES,
        leave=LEAVE,
        members=MEMBERS,
        groups=GROUPS,
    )

    def __init__(self, *, lock_wait: float = DEFAULT_TIMEOUT) -> None:
        #: How long a statement waits for SQLite's lock (the backend's timeout).
        self.lock_wait = lock_wait

    def executor(self, raw: Any, traffic: Traffic) -> Executor:
        return SqliteExecutor(raw, traffic, self.lock_wait)

    def connection_options(self, options: dict[str, Any], timeout: float) -> dict[str, Any]:
        return {**options, "timeout": timeout}  # SQLite's busy handler, for the connection's init_command

    def configure(self, wrapper: Any, timeout: float) -> None:
        raw = wrapper.connection
        raw.isolation_level = None  # autocommit; batches open their own transactions
        raw.execute("PRAGMA busy_timeout = 0")  # the executor waits for the lock itself

    # -- sessions ---------------------------------------------------------------------

    def remove_sessions(self, ex: Executor, session_ids: Sequence[str]) -> Removed:
        placeholders, params = id_list(session_ids)
        _, deleted, _ = ex.run_batch(
            [
                f"{FREE_SESSIONS_LEASES} WHERE session_id IN ({placeholders})",
                f"DELETE FROM simba_session WHERE session_id IN ({placeholders})",
                f"DELETE FROM simba_member WHERE session_id IN ({placeholders})",
            ],
            params,
            atomic=True,
        )
        return Removed(deleted.rowcount, [], [])

    def purge_sessions(self, ex: Executor, session_ids: Sequence[str]) -> Removed:
        """Remove those of ``session_ids`` still expired, in one write transaction.

        The ids were read before this transaction took SQLite's write lock: a keep-alive may
        have renewed one of them since. The sessions still expired go first; their leases and
        memberships follow by the session rows' absence, so one clock reading decides all three.
        """
        placeholders, params = id_list(session_ids)
        deleted, _, _ = ex.run_batch(
            [
                f"DELETE FROM simba_session WHERE session_id IN ({placeholders}) AND expires_at <= {NOW}",
                f"{FREE_SESSIONS_LEASES} WHERE session_id IN ({placeholders})"
                " AND session_id NOT IN (SELECT session_id FROM simba_session)",
                f"DELETE FROM simba_member WHERE session_id IN ({placeholders})"
                " AND session_id NOT IN (SELECT session_id FROM simba_session)",
            ],
            params,
            atomic=True,
        )
        return Removed(deleted.rowcount, [], [])

    def reclaim_idle_leases(self, ex: Executor, idle_ms: int, settle_ms: int, limit: int) -> int:
        *_, deleted = ex.run_batch(
            RECLAIM, {"idle": idle_ms, "settle": settle_ms, "limit": limit}, atomic=True
        )
        return deleted.rowcount

    # -- leases -----------------------------------------------------------------------

    def release(self, ex: Executor, session_id: str, name: str, token: int) -> tuple[bool, bool | None]:
        params = {"sid": session_id, "name": name, "token": token}
        live, released, wanted = ex.run_batch([LIVE, RELEASE, WANTED], params, atomic=True)
        if released.rowcount <= 0 or not wanted.rows:
            return False, None
        return bool(live.rows), bool(wanted.rows[0][0])

    # -- groups -----------------------------------------------------------------------

    def join(self, ex: Executor, session_id: str, group: str) -> bool:
        _, live = ex.run_batch([ADD_MEMBER, LIVE], {"sid": session_id, "group": group}, atomic=True)
        return bool(live.rows)

    # -- errors -----------------------------------------------------------------------

    def interrupter(self, raw: Any) -> Callable[[], None]:
        return raw.interrupt  # type: ignore[no-any-return]

    def is_timeout(self, error: BaseException) -> bool:
        message = str(error)
        return "locked" in message or "interrupted" in message

    def is_missing_table(self, error: BaseException) -> bool:
        return "no such table" in str(error)

    def is_disconnect(self, error: BaseException) -> bool:
        return False


class SqliteBackend(DatabaseBackend):
    """SQLite (a file shared by the processes of one host): no notifications; the engine polls.

    The process's own calls take turns in order (:mod:`.slots`), the session's first: left to
    SQLite's busy handler, which sleeps and retries in no order, a thread cycling a
    lock can starve the keep-alive thread of the same process until its session expires.

    SQLite lets one connection write at a time. When the caller's thread has a
    transaction on the database of the tables that holds its lock (SQLite says
    so: it wrote, or in the rollback journal mode it read), a call that writes
    would wait for the transaction, which waits for the call: it fails at once
    instead, saying how to give the tables a database of their own
    (``django_simba.routers``), and so does a caller about to wait for a session
    (``check_caller``), which the keep-alive thread could not open either. Any
    other call waits for the lock up to its timeout, as outside a transaction.
    """

    vendor = "sqlite"

    def __init__(self, options: Mapping[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT):
        super().__init__(options, timeout=timeout)
        self._turn = Slots(1)  # in order, the session's calls first
        self._sharing: tuple[Any, list[str]] = (None, [])  # (what it was worked out for, aliases)
        _FORK_GUARD.add(self)

    def _make_dialect(self, options: DatabaseOptions) -> SqliteDialect:
        return SqliteDialect(lock_wait=self.timeout)

    def _run(self, operation: Callable[[Executor], T], *, session: bool = False) -> T:
        held = self._callers_lock()
        wait = self.timeout if held is None else min(self.timeout, CALLERS_TRANSACTION_WAIT)
        turn_wait = patience(wait)  # a caller's call waits no longer than its caller does
        if not self._turn.take(turn_wait, first=session):
            if held is not None:  # most likely held by a call that waits for the caller's transaction
                raise _inside_transaction(held.alias)
            within = format_duration(turn_wait)
            raise BackendTimeout(
                f"database {self.alias!r}: no turn for this process's SQLite call within {within}"
            )
        try:
            if held is None:
                return super()._run(operation, session=session)
            return super()._run(functools.partial(_waiting_briefly, operation, held), session=session)
        finally:
            self._turn.give()

    def check_caller(self) -> None:
        held = self._callers_lock()
        if held is not None and held.certain:
            raise _inside_transaction(held.alias)

    def _callers_lock(self) -> CallersLock | None:
        """Where the calling thread's transaction keeps this backend from writing, if it does.

        SQLite says what the transaction holds: the write lock (it wrote, or began IMMEDIATE),
        or a read, which keeps a writer from committing in the rollback journal modes (not in
        WAL, nor in a shared in-memory database, whose locks are per table). Where SQLite cannot
        be asked, any open transaction may hold the lock.
        """
        for alias in self._aliases_sharing_the_file():
            connection = connections[alias]
            raw = connection.connection
            state = None if raw is None else transaction_state(raw)
            if state is None:
                if _in_transaction(connection):
                    return CallersLock(alias, certain=False)
            elif state is TransactionState.WRITE or (
                state is TransactionState.READ and _readers_block_writers(raw, alias)
            ):
                return CallersLock(alias, certain=True)
        return None

    def _aliases_sharing_the_file(self) -> list[str]:
        """The aliases on the database of the tables, whose transactions would block the calls.

        Worked out again only when an alias's database changes (a test database), since it
        resolves paths. A dedicated alias (routed by the router, which keeps every other table
        out of it) is left out: a transaction on it, as a test case opens around each test,
        writes nothing there and holds no lock.
        """
        key = (
            self._settings["NAME"],
            tuple((alias, s.get("ENGINE"), s.get("NAME")) for alias, s in connections.settings.items()),
            routed := any(isinstance(each, SimbaRouter) for each in router.routers),
        )
        if self._sharing[0] != key:
            ours = sqlite_identity(self._settings["NAME"])
            dedicated = self.alias if self.alias != DEFAULT_DB_ALIAS and routed else None
            sharing = [
                alias
                for alias, settings in connections.settings.items()
                if ours is not None  # a private in-memory database: nobody else's connection is on it
                and alias != dedicated
                and load_backend(settings["ENGINE"]).DatabaseWrapper.vendor == "sqlite"
                and sqlite_identity(settings["NAME"]) == ours
            ]
            self._sharing = (key, sharing)
        return self._sharing[1]

    def after_fork(self) -> None:
        super().after_fork()
        self._turn = Slots(1)  # another thread of the parent may have held it


class _ForkGuard:
    """No call of this process's SQLite backends is under way while it forks.

    SQLite keeps a process's locks on a file in the library's memory, which a child
    inherits: forked while a thread of the parent was inside a transaction, the child's
    library believes a connection of its own holds the file's lock, one the child never
    ends, and every call of the child finds the database locked until its session is lost.
    Before ``os.fork()`` the forking thread therefore takes every backend's turn (a call under
    way finishes first; at most a call's timeout), and gives it back in the parent after.
    """

    def __init__(self) -> None:
        self._backends: weakref.WeakSet[SqliteBackend] = weakref.WeakSet()
        self._taken: list[SqliteBackend] = []
        self._hooked = False
        self._lock = threading.Lock()

    def add(self, backend: SqliteBackend) -> None:
        with self._lock:
            self._backends.add(backend)
            if self._hooked:
                return
            self._hooked = True
            os.register_at_fork(
                before=self._before,
                after_in_parent=self._after_in_parent,
                after_in_child=self._after_in_child,
            )

    def _before(self) -> None:
        # A turn not had within the timeout (this very thread holds it, or a call hangs) is left.
        self._taken = [each for each in list(self._backends) if each._turn.take(each.timeout, first=True)]

    def _after_in_parent(self) -> None:
        taken, self._taken = self._taken, []
        for backend in taken:
            backend._turn.give()

    def _after_in_child(self) -> None:
        taken, self._taken = self._taken, []
        for backend in taken:
            backend._turn = Slots(1)  # held by the forking thread, which goes on in the parent only


_FORK_GUARD = _ForkGuard()


def sqlite_identity(name: Any) -> str | None:
    """What makes two SQLite NAMEs the same database; None for a private in-memory one."""
    text = str(name)
    if not text or text == ":memory:":
        return None
    if text.startswith("file:"):
        return text  # a URI, such as a shared in-memory test database
    return os.path.realpath(text)


#: While the caller's transaction keeps the backend from writing, how long a call waits for this
#: process's turn (the call holding it may be a write that waits for that transaction); and where
#: SQLite cannot say what the transaction holds, how long it waits for the database's lock before
#: concluding that the transaction holds it.
CALLERS_TRANSACTION_WAIT = 0.25


@dataclass(frozen=True, slots=True)
class CallersLock:
    """The calling thread's transaction on ``alias`` holds a lock that keeps the backend from
    writing: ``certain`` when SQLite said so, else only possibly (SQLite could not be asked)."""

    alias: str
    certain: bool

    @property
    def lock_wait(self) -> float:
        """How long a call waits for the database's lock: a read goes through, a write cannot."""
        return 0.0 if self.certain else CALLERS_TRANSACTION_WAIT


def _waiting_briefly(operation: Callable[[Executor], T], held: CallersLock, executor: Executor) -> T:
    assert isinstance(executor, SqliteExecutor)
    saved, executor.lock_wait = executor.lock_wait, held.lock_wait
    try:
        return operation(executor)
    except Exception as error:
        if locked(error):
            raise _inside_transaction(held.alias) from error
        raise
    finally:
        executor.lock_wait = saved


def _readers_block_writers(raw: sqlite3.Connection, alias: str) -> bool:
    """A read transaction on the database keeps writers from committing: a file in a rollback
    journal mode, not in WAL (asked of the caller's own connection, which is in it)."""
    if "mode=memory" in str(connections.settings[alias]["NAME"]):
        return False
    (mode,) = raw.execute("PRAGMA main.journal_mode").fetchone()
    return str(mode).lower() != "wal"


def _inside_transaction(alias: str) -> ConfigurationError:
    return ConfigurationError(
        f"django-simba's tables are in the SQLite database of {alias!r}, in which this thread has a"
        " transaction open that holds the database's lock: SQLite lets one connection write at a time,"
        " so the lease would wait for your transaction and your transaction for the lease."
        " Give the tables a SQLite file of their own: an alias in DATABASES,"
        ' SIMBA = {"OPTIONS": {"alias": ...}}, DATABASE_ROUTERS = ["django_simba.routers.SimbaRouter"]'
        " and `manage.py migrate --database <alias>` (see docs/testing.rst and README.rst),"
        " or the memory backend in tests."
    )


def _in_transaction(connection: Any) -> bool:
    raw = connection.connection
    return bool(connection.in_atomic_block or (raw is not None and raw.in_transaction))
