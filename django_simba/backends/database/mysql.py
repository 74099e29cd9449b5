"""MySQL 8 and MariaDB 10.11+: the SQL (upserts with ON DUPLICATE KEY UPDATE, locking subqueries)
and the backend, which the engine polls (no notifications).

A batch of statements goes in one multi-statement query (mysqlclient enables
them), so the keep-alive and most acquires take one round trip each; only a
take-over from a holder that looks dead takes a second one, with the rows
locked. InnoDB's locking reads (``LOCK IN SHARE MODE``, UPDATE) always see the
latest committed rows, and the backend's connections run READ COMMITTED, so
every plain read of a batch sees what committed before it. ``NOW()`` and
``UTC_TIMESTAMP()`` are fixed when a statement starts, before any lock it waits
for: a statement that writes on a judgement of expiry (the keep-alive, a join)
starts only once an earlier statement of its transaction holds the lock.

On MariaDB the acquire and the release, the statements of every lock cycle, are
prepared on each connection when it opens: the server then skips parsing and
setting up their subqueries at every call (about a fifth of the cycle's server
time).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

from .backend import DatabaseBackend
from .dialect import (
    NAMED_PARAMETER,
    Acquired,
    Executor,
    Params,
    Removed,
    Result,
    StatementDialect,
    Statements,
    Traffic,
    named_parameters,
)
from .options import DatabaseOptions

# UTC epoch milliseconds without any time zone conversion (UNIX_TIMESTAMP(NOW()) would
# convert through the session's zone, ambiguous in the hour a DST change repeats).
# MySQL fixes UTC_TIMESTAMP at the start of each statement.
NOW = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)"
# The clock when the expression is evaluated, not when the statement started (SYSDATE, in
# the UTC session time zone the backend's connections set): what a statement reports
# after a lock wait. Never written to a table, so replicas need not agree on it.
NOW_AT_EVALUATION = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', SYSDATE(6)) DIV 1000)"

# A name's first token: above every token of a row the purge reclaimed.
FIRST_TOKEN = "(COALESCE((SELECT floor FROM simba_reclaim WHERE id = 1), 0) + 1)"

OPEN_SESSION = f"""
INSERT INTO simba_session (session_id, expires_at, metadata)
VALUES (%(sid)s, {NOW} + %(lease)s, %(metadata)s)
"""

# The keep-alive locks its row first, in the same transaction, so a take-over holding it
# in share mode is waited for there: NOW is fixed when a statement starts, and RENEW
# starts only once the lock is held, so a session a take-over judged expired meanwhile
# stays expired. The listing after it is a fresh read: it sees every committed take-over.
LOCK_SESSION = "SELECT 1 FROM simba_session WHERE session_id = %(sid)s FOR UPDATE"
RENEW = f"""
UPDATE simba_session SET expires_at = {NOW} + %(lease)s
WHERE session_id = %(sid)s AND expires_at > {NOW}
"""
OWNED = "SELECT name, token FROM simba_lease WHERE session_id = %(sid)s"


# The duplicate key locks the lease row first; then the caller's and the holder's
# session rows are read in share mode, after the lease (the order removal follows).
# Each session row is fetched by its key alone and judged outside the locking read: a
# filter inside it lets InnoDB take another path and skip the lock (then a take-over
# would not wait for a keep-alive in flight). A new name is inserted without checking
# the caller: a row held by a dead session is free anyway, and the reply below reports
# SessionExpired.
def _expiry(session_id: str) -> str:
    """The session's expiry (0 if gone), its row read in share mode."""
    locked = f"SELECT s.expires_at FROM simba_session s WHERE s.session_id = {session_id} LOCK IN SHARE MODE"
    return f"COALESCE(({locked}), 0)"


TAKEABLE = f"""(
    simba_lease.session_id <> %(sid)s
    AND {_expiry("%(sid)s")} > {NOW}
    AND {_expiry("simba_lease.session_id")} <= {NOW}
)"""
# SET runs left to right with already-updated values: the token goes first, while
# session_id still names the previous holder.
TAKE = f"""
INSERT INTO simba_lease (name, session_id, token) VALUES (%(name)s, %(sid)s, {FIRST_TOKEN})
ON DUPLICATE KEY UPDATE
    token = IF({TAKEABLE}, token + 1, token),
    session_id = IF({TAKEABLE}, %(sid)s, session_id)
"""
TAKEN = f"""
SELECT (SELECT expires_at - {NOW} FROM simba_session WHERE session_id = %(sid)s),
       (SELECT token FROM simba_lease WHERE name = %(name)s AND session_id = %(sid)s)
"""

# What needs no session check, in one plain statement: a new name's row, or a released
# row, is taken (the duplicate key locks the row, so a concurrent taker waits and finds
# it held). A holder that is another session is marked as having turned someone away.
# The caller's own session is judged after, by STATE: a row taken by a dead session is
# free to anyone anyway. SET runs left to right: session_id changes last.
TAKE_FREE = f"""
INSERT INTO simba_lease (name, session_id, token) VALUES (%(name)s, %(sid)s, {FIRST_TOKEN})
ON DUPLICATE KEY UPDATE
    wanted = IF(session_id = '', 0, IF(session_id = %(sid)s, wanted, 1)),
    token = IF(session_id = '', token + 1, token),
    session_id = IF(session_id = '', %(sid)s, session_id)
"""


def _after_take(row: str, now: str) -> str:
    """What an acquire learns from the lease ``row`` as TAKE_FREE left it.

    The caller's remaining time on the clock ``now`` (read after TAKE_FREE waited for the
    row, so a session that expired meanwhile is reported expired), the token, whether the
    caller holds the row, and another holder's remaining time (None when it has no session;
    the lookup is skipped, as IF evaluates one branch, when the caller holds the row).
    """
    return f"""(SELECT expires_at - {now} FROM simba_session WHERE session_id = %(sid)s),
       {row}.token, {row}.session_id = %(sid)s,
       IF({row}.session_id = %(sid)s, NULL,
          (SELECT s.expires_at - {NOW} FROM simba_session s WHERE s.session_id = {row}.session_id))"""


# MySQL: read after TAKE_FREE, in the same batch (a statement of its own: NOW is fresh).
STATE = f"SELECT {_after_take('l', NOW)}\nFROM simba_lease l WHERE l.name = %(name)s"
# MariaDB 10.5+: TAKE_FREE answering the same, in one statement (RETURNING sees the row as
# the upsert left it, and reads the clock then).
TAKE_FREE_RETURNING = f"{TAKE_FREE.rstrip()}\nRETURNING {_after_take('simba_lease', NOW_AT_EVALUATION)}"

# On the locked row, after the take: set when the holder is another session (a refusal).
MARK_WANTED = (
    "UPDATE simba_lease SET wanted = (session_id <> %(sid)s) WHERE name = %(name)s AND session_id <> ''"
)

# Frees the term and reports, in one reply, the wanted flag and whether the session was still
# live: LAST_INSERT_ID(expr) hands the client ``1 + wanted + 2 * live`` (0 when no row matched)
# and leaves the column as it was.
RELEASE = (
    f"UPDATE simba_lease SET session_id = '', freed_at = {NOW},"
    " wanted = wanted + 0 * LAST_INSERT_ID(wanted + 1 + 2 * EXISTS("
    f"SELECT 1 FROM simba_session WHERE session_id = %(sid)s AND expires_at > {NOW}))"
    " WHERE name = %(name)s AND session_id = %(sid)s AND (%(token)s = 0 OR token = %(token)s)"
)


def prepared_text(sql: str) -> str:
    """``sql`` with its named parameters as the ``?`` of a server-side prepared statement."""
    return NAMED_PARAMETER.sub("?", sql)


def execute_prepared(handle: str, sql: str) -> str:
    """Run ``sql``, prepared as ``handle``, with the same named parameters (MariaDB's EXECUTE
    takes literals after USING; MySQL's takes only user variables)."""
    return f"EXECUTE {handle} USING " + ", ".join(f"%({name})s" for name in named_parameters(sql))


# Prepared on every MariaDB connection as it opens: the statements of every lock cycle.
PREPARED = {"simba_take_free": TAKE_FREE_RETURNING, "simba_release": RELEASE}
TAKE_FREE_EXECUTE = execute_prepared("simba_take_free", TAKE_FREE_RETURNING)
RELEASE_EXECUTE = execute_prepared("simba_release", RELEASE)

HOLDER_FOR_UPDATE = f"""
SELECT EXISTS (
    SELECT 1 FROM simba_session s WHERE s.session_id = l.session_id AND s.expires_at > {NOW}
)
FROM simba_lease l WHERE l.name = %(name)s AND l.session_id <> '' FOR UPDATE
"""
FREE_LEASE = f"UPDATE simba_lease SET session_id = '', freed_at = {NOW} WHERE name = %(name)s"

FREE_LEASES = f"UPDATE simba_lease SET session_id = '', freed_at = {NOW} WHERE session_id IN %(ids)s"
DELETE_SESSIONS = "DELETE FROM simba_session WHERE session_id IN %(ids)s"
DELETE_MEMBERS = "DELETE FROM simba_member WHERE session_id IN %(ids)s"

# A purge locks the leases, then the sessions (the order of every removal), then reads the
# clock once, after the locks: a keep-alive that renewed a session after the purge's read
# found it expired is waited for, and the session stays. One instant judges every step.
PURGE = [
    "SELECT 1 FROM simba_lease WHERE session_id IN %(ids)s FOR UPDATE",
    "SELECT 1 FROM simba_session WHERE session_id IN %(ids)s FOR UPDATE",
    f"SET @simba_purged_at = {NOW}",
    "UPDATE simba_lease l JOIN simba_session s ON s.session_id = l.session_id"
    " SET l.session_id = '', l.freed_at = @simba_purged_at"
    " WHERE s.session_id IN %(ids)s AND s.expires_at <= @simba_purged_at",
    "DELETE m FROM simba_member m JOIN simba_session s ON s.session_id = m.session_id"
    " WHERE s.session_id IN %(ids)s AND s.expires_at <= @simba_purged_at",
    "DELETE FROM simba_session WHERE session_id IN %(ids)s AND expires_at <= @simba_purged_at",
]

EXPIRED = f"""
SELECT session_id FROM simba_session WHERE expires_at <= {NOW} ORDER BY expires_at LIMIT %(limit)s
"""

# The purge's reclaim, in one transaction that locks the floor first (purges take turns): a
# floor raised long enough ago (``settle``) becomes the settled one and the floor rises over the
# tokens of the rows idle now; rows idle with tokens at or below the settled floor go, oldest
# first. A statement that makes a row reads the floor when it starts: one that started before
# the floor rose cannot still be running a settle later. SET runs left to right: the floor last.
IDLE = "session_id = '' AND freed_at <= @simba_now - %(idle)s"
ANY_IDLE = f"SELECT EXISTS (SELECT 1 FROM simba_lease WHERE session_id = '' AND freed_at <= {NOW} - %(idle)s)"
RECLAIM = [
    "INSERT IGNORE INTO simba_reclaim (id, floor, settled, raised_at) VALUES (1, 0, 0, 0)",
    "SELECT 1 FROM simba_reclaim WHERE id = 1 FOR UPDATE",
    f"SET @simba_now = {NOW}",
    f"SET @simba_top = COALESCE((SELECT max(token) FROM simba_lease WHERE {IDLE}), 0)",
    "UPDATE simba_reclaim SET raised_at = IF(@simba_top > floor, @simba_now, raised_at), settled = floor,"
    " floor = GREATEST(floor, @simba_top) WHERE id = 1 AND raised_at <= @simba_now - %(settle)s",
    f"DELETE FROM simba_lease WHERE {IDLE} AND token <= (SELECT settled FROM simba_reclaim WHERE id = 1)"
    " ORDER BY freed_at LIMIT %(limit)s",
]

SESSIONS = f"SELECT session_id, expires_at - {NOW}, metadata FROM simba_session"

OWNER = f"""
SELECT l.session_id, l.token, s.expires_at - {NOW}, s.metadata
FROM simba_lease l JOIN simba_session s ON s.session_id = l.session_id
WHERE l.name = %(name)s AND s.expires_at > {NOW}
"""

LEASES = f"""
SELECT l.name, l.session_id, l.token, s.expires_at - {NOW}, s.metadata
FROM simba_lease l JOIN simba_session s ON s.session_id = l.session_id
WHERE l.name >= %(low)s AND l.name < %(high)s AND s.expires_at > {NOW}
"""

# Share mode on our own row first, in the join's transaction: a concurrent close waits
# for the join, or the join sees the row gone, and JOIN starts (NOW is fixed then) once
# the lock is held, so a session that expired meanwhile is not joined. With
# CLIENT_FOUND_ROWS an existing membership counts 1, so 0 means "not live".
SHARE_SESSION = "SELECT 1 FROM simba_session WHERE session_id = %(sid)s LOCK IN SHARE MODE"
JOIN = f"""
INSERT INTO simba_member (group_name, session_id)
SELECT %(group)s, %(sid)s FROM DUAL WHERE {_expiry("%(sid)s")} > {NOW}
ON DUPLICATE KEY UPDATE group_name = simba_member.group_name
"""

LEAVE = "DELETE FROM simba_member WHERE group_name = %(group)s AND session_id = %(sid)s"

MEMBERS = f"""
SELECT m.session_id, s.metadata
FROM simba_member m JOIN simba_session s ON s.session_id = m.session_id
WHERE m.group_name = %(group)s AND s.expires_at > {NOW}
"""

GROUPS = f"""
SELECT m.group_name, m.session_id, s.metadata
FROM simba_member m JOIN simba_session s ON s.session_id = m.session_id
WHERE m.group_name >= %(low)s AND m.group_name < %(high)s AND s.expires_at > {NOW}
"""

# Lock wait timeout, MariaDB max_statement_time, MySQL max_execution_time, KILL QUERY.
TIMEOUT_CODES = frozenset({1205, 1969, 3024, 1317})
DEADLOCK = 1213  # ER_LOCK_DEADLOCK: InnoDB rolled the whole transaction back
MISSING_TABLE = 1146
# Server gone away, lost connection, server shutdown, disconnected for inactivity; and an
# unknown prepared statement (a connection that lost its own is replaced like a dead one).
DISCONNECT_CODES = frozenset({2006, 2013, 2055, 1053, 4031, 1243})


def error_code(error: BaseException) -> int | None:
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


@functools.lru_cache(maxsize=256)
def encoded(sql: str, encoding: str) -> bytes:
    """A statement's text as the driver sends it; the dialect has a few dozen texts."""
    return sql.encode(encoding)


class MysqlExecutor(Executor):
    """Statements go through the connection's own calls, as a cursor would make them: a
    mysqlclient cursor costs about 20 µs a statement, a tenth of a lock cycle's client time."""

    def run(self, sql: str, params: Params) -> Result:
        self.traffic.count(1)
        raw = self.raw
        raw.query(self._bound(sql, params))
        stored = raw.store_result()
        rows = list(stored.fetch_row(0)) if stored is not None else []
        result = Result(rows, raw.affected_rows(), raw.insert_id())
        while raw.next_result() == 0:  # -1: no more results; an error raises
            raw.store_result()
        return result

    def _bound(self, sql: str, params: Params) -> bytes:
        """Bound like mysqlclient's cursors: each value escaped by the connection's encoders."""
        raw = self.raw
        encoding = raw.encoding
        text = encoded(sql, encoding)
        if not params:
            return text
        values = {}
        for key, value in params.items():
            kind = type(value)
            if kind is str:  # what raw.literal does for these two, without its dispatch
                literal = raw.string_literal(value.encode(encoding))
            elif kind is int:
                literal = b"%d" % value
            else:
                literal = raw.literal(value)
            values[encoded(key, encoding)] = literal
        return text % values

    def run_batch(self, statements: Sequence[str], params: Params, *, atomic: bool) -> list[Result]:
        sql = ";\n".join(statements)
        if atomic:
            sql = f"START TRANSACTION;\n{sql};\nCOMMIT"
        self.traffic.count(len(statements))
        raw = self.raw
        raw.query(self._bound(sql, params))
        results = []
        while True:
            stored = raw.store_result()
            rows = list(stored.fetch_row(0)) if stored is not None else []
            results.append(Result(rows, raw.affected_rows(), raw.insert_id()))
            if raw.next_result() != 0:  # -1: no more results; an error raises
                break
        return results[1:-1] if atomic else results


class MysqlDialect(StatementDialect):
    vendor = "mysql"
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
        holder=HOLDER_FOR_UPDATE,
        free_lease=FREE_LEASE,
        owner=OWNER,
        leases=LEASES,
        leave=LEAVE,
        members=MEMBERS,
        groups=GROUPS,
        lock_session=LOCK_SESSION,
    )

    def executor(self, raw: Any, traffic: Traffic) -> Executor:
        return MysqlExecutor(raw, traffic)

    def connection_options(self, options: dict[str, Any], timeout: float) -> dict[str, Any]:
        options = dict(options)
        options.setdefault("connect_timeout", max(1, math.ceil(timeout)))
        return options

    #: The server takes INSERT ... RETURNING (MariaDB 10.5+; MySQL has none); None until a
    #: first connection tells.
    returning: bool | None = None
    #: The cycle's statements run prepared (MariaDB 10.5+); None until a first connection tells.
    prepared: bool | None = None

    def configure(self, wrapper: Any, timeout: float) -> None:
        raw = wrapper.connection
        raw.autocommit(True)
        if self.returning is None:
            self.returning = bool(wrapper.mysql_is_mariadb and wrapper.mysql_version >= (10, 5))
        if self.prepared is None:
            self.prepared = bool(wrapper.mysql_is_mariadb and wrapper.mysql_version >= (10, 5))
        # innodb_lock_wait_timeout counts whole seconds; the statement limit is exact.
        if wrapper.mysql_is_mariadb:
            statement_limit = f"max_statement_time = {timeout:.3f}"
        else:
            statement_limit = f"max_execution_time = {max(1, round(timeout * 1000))}"
        cursor = raw.cursor()
        try:
            cursor.execute(
                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;"
                f" SET SESSION innodb_lock_wait_timeout = {max(1, math.ceil(timeout))},"
                f" SESSION {statement_limit}, SESSION time_zone = '+00:00'"
            )
            while cursor.nextset():
                pass
            if self.prepared:
                for handle, sql in PREPARED.items():
                    cursor.execute(f"PREPARE {handle} FROM %s", (prepared_text(sql),))
        finally:
            cursor.close()

    # -- sessions ---------------------------------------------------------------------

    def remove_sessions(self, ex: Executor, session_ids: Sequence[str]) -> Removed:
        _, deleted, _ = ex.run_batch(
            [FREE_LEASES, DELETE_SESSIONS, DELETE_MEMBERS], {"ids": tuple(session_ids)}, atomic=True
        )
        return Removed(deleted.rowcount, [], [])

    def purge_sessions(self, ex: Executor, session_ids: Sequence[str]) -> Removed:
        *_, deleted = ex.run_batch(PURGE, {"ids": tuple(session_ids)}, atomic=True)
        return Removed(deleted.rowcount, [], [])

    def reclaim_idle_leases(self, ex: Executor, idle_ms: int, settle_ms: int, limit: int) -> int:
        *_, deleted = ex.run_batch(
            RECLAIM, {"idle": idle_ms, "settle": settle_ms, "limit": limit}, atomic=True
        )
        return deleted.rowcount

    # -- leases -----------------------------------------------------------------------

    def acquire(self, ex: Executor, session_id: str, name: str) -> Acquired:
        """One plain statement (MariaDB) or batch (MySQL) for a new name, a released one or a
        live holder; a holder that looks dead goes on to the locked take-over."""
        params = {"sid": session_id, "name": name}
        if self.returning:
            state = ex.run(TAKE_FREE_EXECUTE if self.prepared else TAKE_FREE_RETURNING, params)
        else:
            _, state = ex.run_batch([TAKE_FREE, STATE], params, atomic=False)
        remaining, token, mine, held_for = state.rows[0]
        if remaining is None or remaining <= 0:
            return Acquired(None, None)
        if mine:
            return Acquired(int(remaining), int(token))
        if held_for is not None and held_for > 0:
            return Acquired(int(remaining), None)
        return super().acquire(ex, session_id, name)

    def release(self, ex: Executor, session_id: str, name: str, token: int) -> tuple[bool, bool | None]:
        statement = RELEASE_EXECUTE if self.prepared else RELEASE
        freed = ex.run(statement, {"sid": session_id, "name": name, "token": token})
        if freed.rowcount <= 0 or not freed.last_id:
            return False, None
        live, wanted = divmod(freed.last_id - 1, 2)
        return bool(live), bool(wanted)

    # -- groups -----------------------------------------------------------------------

    def join(self, ex: Executor, session_id: str, group: str) -> bool:
        _, joined = ex.run_batch([SHARE_SESSION, JOIN], {"sid": session_id, "group": group}, atomic=True)
        return joined.rowcount > 0

    # -- errors -----------------------------------------------------------------------

    def is_timeout(self, error: BaseException) -> bool:
        return error_code(error) in TIMEOUT_CODES

    def is_missing_table(self, error: BaseException) -> bool:
        return error_code(error) == MISSING_TABLE

    def is_disconnect(self, error: BaseException) -> bool:
        return error_code(error) in DISCONNECT_CODES

    def is_deadlock(self, error: BaseException) -> bool:
        return error_code(error) == DEADLOCK


class MysqlBackend(DatabaseBackend):
    """MySQL 8 / MariaDB 10.11+: no notifications; the engine polls."""

    vendor = "mysql"

    def _make_dialect(self, options: DatabaseOptions) -> MysqlDialect:
        return MysqlDialect()
