"""SQLite 3.35+: one writer at a time, so writes serialize without row locks.

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

import random
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any

from .base import (
    Executor,
    Params,
    Removed,
    Result,
    StatementDialect,
    Statements,
    Traffic,
)

# julianday('now') is fixed for one sqlite3_step; a write does all its work in its first
# step. Reads that return many rows take it once from a materialized CTE.
NOW = "CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
CLOCK = f"clock(now) AS MATERIALIZED (SELECT {NOW})"

OPEN_SESSION = f"""
INSERT INTO simba_session (session_id, expires_at, metadata) VALUES (:sid, {NOW} + :lease, :metadata)
"""

RENEW = f"UPDATE simba_session SET expires_at = {NOW} + :lease WHERE session_id = :sid AND expires_at > {NOW}"
OWNED = "SELECT name, token FROM simba_lease WHERE session_id = :sid"

# One upsert: a new name is inserted only for a live caller; an existing row is taken when
# free or held by a session that is not live. SET reads the row's previous values.
TAKE = f"""
INSERT INTO simba_lease (name, session_id, token)
SELECT :name, :sid, 1 WHERE EXISTS (
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
    "UPDATE simba_lease SET session_id = '' WHERE name = :name AND session_id = :sid"
    " AND (:token = 0 OR token = :token)"
)
WANTED = "SELECT wanted FROM simba_lease WHERE name = :name"

HOLDER = f"""
SELECT EXISTS (
    SELECT 1 FROM simba_session s WHERE s.session_id = l.session_id AND s.expires_at > {NOW}
)
FROM simba_lease l WHERE l.name = :name AND l.session_id <> ''
"""
FREE_LEASE = "UPDATE simba_lease SET session_id = '' WHERE name = :name"

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

    def __init__(self) -> None:
        #: How long a statement waits for SQLite's lock (the backend sets its timeout).
        self.lock_wait = 5.0

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
                f"UPDATE simba_lease SET session_id = '' WHERE session_id IN ({placeholders})",
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
                f"UPDATE simba_lease SET session_id = '' WHERE session_id IN ({placeholders})"
                " AND session_id NOT IN (SELECT session_id FROM simba_session)",
                f"DELETE FROM simba_member WHERE session_id IN ({placeholders})"
                " AND session_id NOT IN (SELECT session_id FROM simba_session)",
            ],
            params,
            atomic=True,
        )
        return Removed(deleted.rowcount, [], [])

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
