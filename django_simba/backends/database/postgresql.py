"""PostgreSQL (14+): its SQL (CTEs, RETURNING, FOR SHARE, NOTIFY on every release) and its backends.

A single statement travels in the extended protocol, prepared once per
connection (psycopg keeps it), with its arguments bound on the server. A batch of
statements goes in one simple-query message: one round trip, one implicit
transaction, and a fresh snapshot for every statement (READ COMMITTED). That
is why a take-over, the keep-alive and a join lock their rows in a statement of
their own and judge them in the next: a single statement decides on the
snapshot and the clock it read when it started, so it could miss a session or a
take-over committed while it waited for a row lock, or renew a session that
expired meanwhile.
Batched statements are prepared once per connection (``PREPARE``) and run by
name (``EXECUTE``), so their CTEs are not parsed and planned again each time.

An acquire first tries the cases one statement can decide on its snapshot
(``TAKE_FREE``): a released row, a live holder. A new name (or one whose idle row the
purge reclaimed), a holder that looks dead, or the caller itself go to the locked batch.

Two backends serve PostgreSQL: :class:`PostgresqlBackend` hears releases and group changes
through LISTEN/NOTIFY; :class:`PolledPostgresqlBackend`, behind a pooler in transaction mode
with no direct connection to listen on, sends no NOTIFY and is polled.

The module is longer than most (about 750 lines): half of it is the SQL text, kept beside
the methods that run each statement and judge its rows, so that a reader checks one against
the other without switching files.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...spi import DEFAULT_TIMEOUT, ConfigurationError, Notification, NotificationKind, NotificationListener
from .backend import DatabaseBackend
from .dialect import (
    NAMED_PARAMETER,
    Acquired,
    Dialect,
    Executor,
    Params,
    Removed,
    Renewed,
    Result,
    Row,
    Traffic,
    named_parameters,
    prefix_range,
)
from .listener import PostgresListener
from .options import DatabaseOptions, parse_options

logger = logging.getLogger(__name__)

#: Payloads: "released:<name>" on the name's channel, "group:<name>" on the group's.
RELEASED_PREFIX = "released:"
GROUP_PREFIX = "group:"
# A channel per name, so that a process hears only of what it watches. Channels are
# identifiers (at most 63 bytes): a prefix and the MD5 of the name's UTF-8 bytes.
LEASE_CHANNEL = "simba_l_"
GROUP_CHANNEL = "simba_g_"


def lease_channel(name: str) -> str:
    return LEASE_CHANNEL + _digest(name)


def group_channel(group: str) -> str:
    return GROUP_CHANNEL + _digest(group)


def _digest(name: str) -> str:
    return hashlib.md5(name.encode("utf-8"), usedforsecurity=False).hexdigest()


def _notify(channel: str, prefix: str, column: str) -> str:
    """SQL sending ``prefix || column`` on the channel of ``column`` (as ``lease_channel`` names it)."""
    return f"pg_notify('{channel}' || md5(convert_to({column}, 'UTF8')), '{prefix}' || {column})"


#: Every notification the statements send: releases of leases, changes of groups.
NOTIFICATIONS = (
    _notify(LEASE_CHANNEL, RELEASED_PREFIX, "name"),
    _notify(GROUP_CHANNEL, GROUP_PREFIX, "group_name"),
)


def silenced(sql: str) -> str:
    """``sql`` sending no notification (its notify columns read NULL).

    A NOTIFY holds a lock of the whole cluster from its statement until its commit is on
    disk, so notifying transactions commit one at a time: where nobody listens, the
    backend sends none.
    """
    for notification in NOTIFICATIONS:
        sql = sql.replace(notification, "NULL")
    return sql


# Read once per statement (a materialized CTE), after any earlier statement of the batch
# waited for a lock; epoch extraction is in UTC whatever the session's time zone.
NOW = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
CLOCK = f"clock AS MATERIALIZED (SELECT {NOW} AS now)"

OPEN_SESSION = f"""
WITH {CLOCK}
INSERT INTO simba_session (session_id, expires_at, metadata)
SELECT %(sid)s, clock.now + %(lease)s, %(metadata)s FROM clock
"""

# The keep-alive locks its row first: a take-over holding it FOR SHARE is waited for
# here. Only then does RENEW read the clock (a statement's clock is read before any
# lock it waits for), so a session a take-over judged expired meanwhile stays expired.
# The listing that follows has its own snapshot: it sees every take-over that committed.
LOCK_SESSION = "SELECT 1 FROM simba_session WHERE session_id = %(sid)s FOR NO KEY UPDATE"
RENEW = f"""
WITH {CLOCK}
UPDATE simba_session s SET expires_at = clock.now + %(lease)s FROM clock
WHERE s.session_id = %(sid)s AND s.expires_at > clock.now
RETURNING s.expires_at - clock.now
"""
OWNED = "SELECT name, token FROM simba_lease WHERE session_id = %(sid)s"

# Creates the row of a new name, its token at the reclaim floor (the take adds one), and locks
# the row either way, without writing it (a DO UPDATE whose WHERE is false still locks the
# conflicting row).
LOCK_LEASE = """
INSERT INTO simba_lease (name, session_id, token)
VALUES (%(name)s, '', COALESCE((SELECT floor FROM simba_reclaim WHERE id = 1), 0))
ON CONFLICT (name) DO UPDATE SET token = simba_lease.token WHERE false
"""

# Decides what a snapshot can, with a plan kept small (every node of a plan is set up at
# each execution, run or not): takes a released row for a caller live on the snapshot
# (the UPDATE re-checks a row that changed under it, so a concurrent take-over wins
# alone), or, when it took nothing, reports the caller's remaining time (None when not
# live) and whether a live session other than the caller holds the name (refusing is
# always safe; a refusal writes nothing, not even a row lock). Anything else (a new
# name, a holder that looks dead, the caller itself) goes to the locked batch, which
# creates the row of a new name. A write may wait for the row's lock (a release, a
# take-over): the caller's remaining time is then measured on the clock of its
# RETURNING, read once the row is written, so a session that expired meanwhile is
# reported expired (what it took belongs to a dead session: free to anyone).
TAKE_FREE = f"""
WITH taken AS (
    UPDATE simba_lease l SET token = l.token + 1, session_id = s.session_id
    FROM simba_session s
    WHERE l.name = %(name)s AND l.session_id = '' AND s.session_id = %(sid)s AND s.expires_at > {NOW}
    RETURNING s.expires_at - {NOW} AS remaining, l.token
)
SELECT remaining, token, false FROM taken
UNION ALL
SELECT (SELECT s.expires_at - {NOW} FROM simba_session s
        WHERE s.session_id = %(sid)s AND s.expires_at > {NOW}),
       NULL,
       EXISTS (
           SELECT 1 FROM simba_lease l JOIN simba_session s ON s.session_id = l.session_id
           WHERE l.name = %(name)s AND l.session_id NOT IN ('', %(sid)s) AND s.expires_at > {NOW}
       )
WHERE NOT EXISTS (SELECT 1 FROM taken)
"""

# With the lease row locked (its holder cannot change), locks the caller's and the
# holder's session rows FOR SHARE: a keep-alive in flight is waited for, and neither
# session can be renewed or removed until the take-over commits.
LOCK_SESSIONS = """
SELECT 1 FROM simba_session s
WHERE s.session_id IN (%(sid)s, (SELECT l.session_id FROM simba_lease l WHERE l.name = %(name)s))
FOR SHARE OF s
"""

# Runs with every row it judges locked, on a snapshot and a clock taken after the locks:
# it sees the renewal of a keep-alive it waited for, and a session that expired while it
# waited is expired. The take-over serializes with the holder's keep-alive.
TAKE = f"""
WITH {CLOCK},
live AS (
    SELECT s.expires_at - clock.now AS remaining FROM simba_session s, clock
    WHERE s.session_id = %(sid)s AND s.expires_at > clock.now
),
current AS (SELECT session_id AS holder, token FROM simba_lease WHERE name = %(name)s),
taken AS (
    UPDATE simba_lease l SET token = l.token + 1, session_id = %(sid)s
    FROM clock
    WHERE l.name = %(name)s AND l.session_id <> %(sid)s
      AND EXISTS (SELECT 1 FROM live)
      AND NOT EXISTS (
          SELECT 1 FROM simba_session s WHERE s.session_id = l.session_id AND s.expires_at > clock.now
      )
    RETURNING l.token
)
SELECT (SELECT remaining FROM live),
       COALESCE((SELECT token FROM taken), (SELECT token FROM current WHERE holder = %(sid)s))
"""

# One UPDATE, no CTE (a smaller plan): its RETURNING runs once the row is written. The last
# column: whether the freed term's session was still live, so its holder had it to the end.
RELEASE = f"""
UPDATE simba_lease SET session_id = '', freed_at = {NOW}
WHERE name = %(name)s AND session_id = %(sid)s AND (%(token)s = 0 OR token = %(token)s)
RETURNING name, {_notify(LEASE_CHANNEL, RELEASED_PREFIX, "name")},
       EXISTS (SELECT 1 FROM simba_session s WHERE s.session_id = %(sid)s AND s.expires_at > {NOW})
"""

FORCE_RELEASE = f"""
WITH {CLOCK},
previous AS (
    SELECT session_id FROM simba_lease WHERE name = %(name)s AND session_id <> '' FOR UPDATE
),
freed AS (
    UPDATE simba_lease l SET session_id = '', freed_at = clock.now FROM previous, clock
    WHERE l.name = %(name)s RETURNING l.name
),
notified AS (SELECT {_notify(LEASE_CHANNEL, RELEASED_PREFIX, "name")} FROM freed)
SELECT EXISTS (
    SELECT 1 FROM previous JOIN simba_session s ON s.session_id = previous.session_id, clock
    WHERE s.expires_at > clock.now
), (SELECT count(*) FROM notified)
"""

FREE_LEASES = f"""
WITH freed AS (
    UPDATE simba_lease SET session_id = '', freed_at = {NOW} WHERE session_id = ANY(%(ids)s) RETURNING name
)
SELECT name, {_notify(LEASE_CHANNEL, RELEASED_PREFIX, "name")} FROM freed
"""
DELETE_SESSIONS = "DELETE FROM simba_session WHERE session_id = ANY(%(ids)s)"
DELETE_MEMBERS = f"""
WITH gone AS (DELETE FROM simba_member WHERE session_id = ANY(%(ids)s) RETURNING group_name),
changed AS (SELECT DISTINCT group_name FROM gone)
SELECT group_name, {_notify(GROUP_CHANNEL, GROUP_PREFIX, "group_name")} FROM changed
"""

# A purge locks the leases, then the sessions (the order of every removal), then judges
# on a snapshot and clock taken after the locks: a keep-alive that renewed a session
# after the purge's read found it expired is waited for, and the session stays.
LOCK_PURGED_LEASES = "SELECT 1 FROM simba_lease WHERE session_id = ANY(%(ids)s) FOR UPDATE"
LOCK_PURGED_SESSIONS = "SELECT 1 FROM simba_session WHERE session_id = ANY(%(ids)s) FOR UPDATE"
PURGE = f"""
WITH {CLOCK},
gone AS MATERIALIZED (
    SELECT session_id FROM simba_session, clock WHERE session_id = ANY(%(ids)s) AND expires_at <= clock.now
),
freed AS (
    UPDATE simba_lease l SET session_id = '', freed_at = clock.now FROM clock
    WHERE l.session_id IN (SELECT session_id FROM gone) RETURNING l.name
),
deleted AS (DELETE FROM simba_session WHERE session_id IN (SELECT session_id FROM gone) RETURNING 1),
left_groups AS (
    DELETE FROM simba_member WHERE session_id IN (SELECT session_id FROM gone) RETURNING group_name
),
released AS (SELECT name, {_notify(LEASE_CHANNEL, RELEASED_PREFIX, "name")} FROM freed),
changed AS (SELECT DISTINCT group_name FROM left_groups),
announced AS (SELECT group_name, {_notify(GROUP_CHANNEL, GROUP_PREFIX, "group_name")} FROM changed)
SELECT (SELECT count(*) FROM deleted),
       ARRAY(SELECT name FROM released),
       ARRAY(SELECT group_name FROM announced)
"""

# The purge's reclaim, in one transaction that locks the floor first (purges take turns): a
# floor raised long enough ago (``settle``) becomes the settled one and the floor rises over the
# tokens of the rows idle now; rows idle with tokens at or below the settled floor go, oldest
# first, skipping any a call has locked. A statement that makes a row reads the floor when it
# starts: one that started before the floor rose cannot still be running a settle later.
IDLE = "l.session_id = '' AND l.freed_at <= clock.now - %(idle)s"
ANY_IDLE = f"WITH {CLOCK} SELECT EXISTS (SELECT 1 FROM simba_lease l, clock WHERE {IDLE})"
RECLAIM = [
    "INSERT INTO simba_reclaim (id, floor, settled, raised_at) VALUES (1, 0, 0, 0)"
    " ON CONFLICT (id) DO NOTHING",
    "SELECT 1 FROM simba_reclaim WHERE id = 1 FOR UPDATE",
    f"""
WITH {CLOCK},
idle AS (SELECT COALESCE(max(l.token), 0) AS top FROM simba_lease l, clock WHERE {IDLE})
UPDATE simba_reclaim r SET settled = r.floor, floor = GREATEST(r.floor, idle.top),
    raised_at = CASE WHEN idle.top > r.floor THEN clock.now ELSE r.raised_at END
FROM clock, idle WHERE r.id = 1 AND r.raised_at <= clock.now - %(settle)s
""",
    f"""
WITH {CLOCK},
doomed AS (
    SELECT l.name FROM simba_lease l, clock
    WHERE {IDLE} AND l.token <= (SELECT settled FROM simba_reclaim WHERE id = 1)
    ORDER BY l.freed_at LIMIT %(limit)s FOR UPDATE OF l SKIP LOCKED
)
DELETE FROM simba_lease l USING doomed WHERE l.name = doomed.name AND l.session_id = ''
""",
]

EXPIRED = f"""
WITH {CLOCK}
SELECT session_id FROM simba_session, clock WHERE expires_at <= clock.now
ORDER BY expires_at LIMIT %(limit)s
"""

SESSIONS = f"WITH {CLOCK} SELECT session_id, expires_at - clock.now, metadata FROM simba_session, clock"

OWNER = f"""
WITH {CLOCK}
SELECT l.session_id, l.token, s.expires_at - clock.now, s.metadata
FROM simba_lease l JOIN simba_session s ON s.session_id = l.session_id, clock
WHERE l.name = %(name)s AND s.expires_at > clock.now
"""

LEASES = f"""
WITH {CLOCK}
SELECT l.name, l.session_id, l.token, s.expires_at - clock.now, s.metadata
FROM simba_lease l JOIN simba_session s ON s.session_id = l.session_id, clock
WHERE l.name >= %(low)s AND l.name < %(high)s AND s.expires_at > clock.now
"""

# The join locks our own row FOR SHARE first (a concurrent close waits for the join, or
# the join sees the row gone), then judges it on the clock of the next statement: a
# session that expired while the lock was waited for is not joined.
SHARE_SESSION = "SELECT 1 FROM simba_session WHERE session_id = %(sid)s FOR SHARE"
JOIN = f"""
WITH {CLOCK},
live AS (
    SELECT 1 FROM simba_session s, clock WHERE s.session_id = %(sid)s AND s.expires_at > clock.now
),
added AS (
    INSERT INTO simba_member (group_name, session_id) SELECT %(group)s, %(sid)s FROM live
    ON CONFLICT DO NOTHING RETURNING group_name
),
notified AS (SELECT {_notify(GROUP_CHANNEL, GROUP_PREFIX, "group_name")} FROM added)
SELECT EXISTS (SELECT 1 FROM live), (SELECT count(*) FROM notified)
"""

LEAVE = f"""
WITH gone AS (
    DELETE FROM simba_member WHERE group_name = %(group)s AND session_id = %(sid)s RETURNING group_name
)
SELECT group_name, {_notify(GROUP_CHANNEL, GROUP_PREFIX, "group_name")} FROM gone
"""

MEMBERS = f"""
WITH {CLOCK}
SELECT m.session_id, s.metadata
FROM simba_member m JOIN simba_session s ON s.session_id = m.session_id, clock
WHERE m.group_name = %(group)s AND s.expires_at > clock.now
"""

GROUPS = f"""
WITH {CLOCK}
SELECT m.group_name, m.session_id, s.metadata
FROM simba_member m JOIN simba_session s ON s.session_id = m.session_id, clock
WHERE m.group_name >= %(low)s AND m.group_name < %(high)s AND s.expires_at > clock.now
"""

# SQLSTATEs: query_canceled (statement_timeout), lock_not_available (lock_timeout).
TIMEOUT_STATES = frozenset({"57014", "55P03"})
DEADLOCK_DETECTED = "40P01"  # the transaction was rolled back
UNDEFINED_TABLE = "42P01"

PARAMETER_TYPES = {
    "sid": "varchar",
    "name": "varchar",
    "group": "varchar",
    "ids": "varchar[]",
    "lease": "bigint",
}


@dataclass(frozen=True, slots=True)
class Prepared:
    """A statement prepared once per connection, then executed by name with literal arguments."""

    name: str
    sql: str

    @property
    def parameters(self) -> list[str]:
        return list(dict.fromkeys(named_parameters(self.sql)))

    def prepare(self) -> str:
        numbers = {parameter: n for n, parameter in enumerate(self.parameters, start=1)}
        body = NAMED_PARAMETER.sub(lambda match: f"${numbers[match.group(1)]}", self.sql)
        types = ", ".join(PARAMETER_TYPES[parameter] for parameter in self.parameters)
        return f"PREPARE {self.name}{f'({types})' if types else ''} AS {body}"

    def execute(self) -> str:
        arguments = ", ".join(f"%({parameter})s" for parameter in self.parameters)
        return f"EXECUTE {self.name}{f'({arguments})' if arguments else ''}"


#: libpq's PGRES_TUPLES_OK: the statement returned rows (psycopg.pq.ExecStatus.TUPLES_OK).
TUPLES_OK = 2

#: psycopg's threshold: unasked statements are never prepared (the connection's prepared
#: statements stay ours), and ``prepare=True`` still prepares.
PREPARE_NEVER_UNASKED = 2**31 - 1

#: The statements sent in batches, prepared by name on every new connection.
STATEMENTS = {
    name: Prepared(f"simba_{name.lower()}", sql)
    for name, sql in {
        "LOCK_SESSION": LOCK_SESSION,
        "RENEW": RENEW,
        "OWNED": OWNED,
        "LOCK_LEASE": LOCK_LEASE,
        "LOCK_SESSIONS": LOCK_SESSIONS,
        "TAKE": TAKE,
        "SHARE_SESSION": SHARE_SESSION,
        "JOIN": JOIN,
        "FREE_LEASES": FREE_LEASES,
        "DELETE_SESSIONS": DELETE_SESSIONS,
        "DELETE_MEMBERS": DELETE_MEMBERS,
        "LOCK_PURGED_LEASES": LOCK_PURGED_LEASES,
        "LOCK_PURGED_SESSIONS": LOCK_PURGED_SESSIONS,
        "PURGE": PURGE,
    }.items()
}
#: What a batch sends: ``EXECUTE`` of each prepared statement.
RUN = {name: statement.execute() for name, statement in STATEMENTS.items()}
#: What a batch sends behind a pooler in transaction mode, where nothing can be prepared.
TEXT = {name: statement.sql for name, statement in STATEMENTS.items()}


class PostgresqlExecutor(Executor):
    """One statement: server-side binding of a prepared statement. A batch: client-side
    binding, so its statements travel as one simple query."""

    def _cursor(self) -> Any:
        import psycopg

        return psycopg.ClientCursor(self.raw)

    _statement_cursor: Any = None

    def run(self, sql: str, params: Params) -> Result:
        self.traffic.count(1)
        cursor = self._statement_cursor
        if cursor is None:
            import psycopg

            # Not raw.cursor(): Django makes that a client-side binding cursor. Kept for the
            # connection's life: making one costs as much as a tenth of a statement.
            cursor = self._statement_cursor = psycopg.Cursor(self.raw)
        cursor.execute(sql, params, prepare=True)
        # The status says whether rows came back; ``description`` would build column objects.
        result = cursor.pgresult
        rows = cursor.fetchall() if result is not None and result.status == TUPLES_OK else []
        return Result(rows, cursor.rowcount)

    def run_batch(self, statements: Sequence[str], params: Params, *, atomic: bool) -> list[Result]:
        # A multi-statement simple query is one implicit transaction already.
        self.traffic.count(len(statements))
        return self._simple_query(statements, params)

    def _simple_query(self, statements: Sequence[str], params: Params) -> list[Result]:
        with self._cursor() as cursor:
            cursor.execute(";\n".join(statements), params)
            results = []
            while True:
                rows = cursor.fetchall() if cursor.description is not None else []
                results.append(Result(rows, cursor.rowcount))
                if not cursor.nextset():
                    return results


class PooledPostgresqlExecutor(PostgresqlExecutor):
    """Behind a pooler in transaction mode (PgBouncer): every call is one simple query, a
    transaction of its own that sets the isolation and timeouts for itself only. A session
    setting would stay on the server connection for the pooler's next client, and the next
    call may get another server connection anyway."""

    def __init__(self, raw: Any, traffic: Traffic, prologue: Sequence[str]) -> None:
        super().__init__(raw, traffic)
        self._prologue = list(prologue)

    def run(self, sql: str, params: Params) -> Result:
        return self.run_batch([sql], params, atomic=True)[0]

    def run_batch(self, statements: Sequence[str], params: Params, *, atomic: bool) -> list[Result]:
        self.traffic.count(len(statements))
        return self._simple_query([*self._prologue, *statements], params)[len(self._prologue) :]


def transaction_settings(timeout: float) -> list[str]:
    """What every transaction behind a pooler sets first (``SET LOCAL``: for itself only)."""
    milliseconds = max(1, round(timeout * 1000))
    return [
        "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
        f"SET LOCAL statement_timeout = {milliseconds}",
        f"SET LOCAL lock_timeout = {milliseconds}",
    ]


class PostgresqlDialect(Dialect):
    """``transaction_pooling``: the connections go through PgBouncer in transaction mode (or a
    pooler like it): nothing is prepared and no session setting is made."""

    vendor = "postgresql"
    reclaim = RECLAIM
    any_idle = ANY_IDLE

    def __init__(
        self, *, transaction_pooling: bool = False, timeout: float = DEFAULT_TIMEOUT, notify: bool = True
    ) -> None:
        self.transaction_pooling = transaction_pooling
        self.notify = notify
        self._timeout = timeout
        if notify:
            self._batch = TEXT if transaction_pooling else RUN
        else:  # only polled behind a pooler: its statements are never prepared
            self._batch = {name: silenced(sql) for name, sql in TEXT.items()}

    def _statement(self, sql: str) -> str:
        """A single statement as this dialect sends it (without its notifications, if it sends none)."""
        return sql if self.notify else silenced(sql)

    def _statements(self, *names: str) -> list[str]:
        """What a batch sends for the statements ``names``: their EXECUTE, or their text."""
        return [self._batch[name] for name in names]

    def executor(self, raw: Any, traffic: Traffic) -> Executor:
        if self.transaction_pooling:
            return PooledPostgresqlExecutor(raw, traffic, transaction_settings(self._timeout))
        return PostgresqlExecutor(raw, traffic)

    def connection_options(self, options: dict[str, Any], timeout: float) -> dict[str, Any]:
        options = dict(options)
        # The backend's connections are its own: never borrowed from the alias's pool.
        options.pop("pool", None)
        options.setdefault("connect_timeout", max(2, round(timeout + 0.5)))
        return options

    def configure(self, wrapper: Any, timeout: float) -> None:
        raw = wrapper.connection
        raw.autocommit = True
        if self.transaction_pooling:
            raw.prepare_threshold = None  # psycopg prepares nothing, even when asked
            return
        # Django turns prepared statements off; run() asks for them (prepare=True), others never.
        raw.prepare_threshold = PREPARE_NEVER_UNASKED
        milliseconds = max(1, round(timeout * 1000))
        settings = [
            f"SET statement_timeout = {milliseconds}",
            f"SET lock_timeout = {milliseconds}",
            "SET default_transaction_isolation = 'read committed'",
        ]
        with raw.cursor() as cursor:
            cursor.execute(";\n".join(settings + [statement.prepare() for statement in STATEMENTS.values()]))

    # -- sessions ---------------------------------------------------------------------

    def open_session(self, ex: Executor, session_id: str, lease_ms: int, metadata: str) -> int:
        ex.run(OPEN_SESSION, {"sid": session_id, "lease": lease_ms, "metadata": metadata})
        return lease_ms

    def keep_alive(self, ex: Executor, session_id: str, lease_ms: int) -> Renewed:
        _, renewed, owned = ex.run_batch(
            self._statements("LOCK_SESSION", "RENEW", "OWNED"),
            {"sid": session_id, "lease": lease_ms},
            atomic=True,
        )
        if not renewed.rows:
            return Renewed(None, {})
        return Renewed(int(renewed.rows[0][0]), {name: int(token) for name, token in owned.rows})

    def remove_sessions(self, ex: Executor, session_ids: Sequence[str]) -> Removed:
        freed, deleted, left = ex.run_batch(
            self._statements("FREE_LEASES", "DELETE_SESSIONS", "DELETE_MEMBERS"),
            {"ids": list(session_ids)},
            atomic=True,
        )
        return Removed(deleted.rowcount, [row[0] for row in freed.rows], [row[0] for row in left.rows])

    def purge_sessions(self, ex: Executor, session_ids: Sequence[str]) -> Removed:
        *_, purged = ex.run_batch(
            self._statements("LOCK_PURGED_LEASES", "LOCK_PURGED_SESSIONS", "PURGE"),
            {"ids": list(session_ids)},
            atomic=True,
        )
        deleted, released, groups = purged.rows[0]
        return Removed(int(deleted), list(released), list(groups))

    def expired_sessions(self, ex: Executor, limit: int) -> list[str]:
        return [row[0] for row in ex.run(EXPIRED, {"limit": limit}).rows]

    def reclaim_idle_leases(self, ex: Executor, idle_ms: int, settle_ms: int, limit: int) -> int:
        *_, deleted = ex.run_batch(
            RECLAIM, {"idle": idle_ms, "settle": settle_ms, "limit": limit}, atomic=True
        )
        return deleted.rowcount

    def sessions(self, ex: Executor) -> list[Row]:
        return ex.run(SESSIONS, {}).rows

    # -- leases -----------------------------------------------------------------------

    def acquire(self, ex: Executor, session_id: str, name: str) -> Acquired:
        params = {"sid": session_id, "name": name}
        remaining, token, held = ex.run(TAKE_FREE, params).rows[0]
        if remaining is not None and token is None and not held:
            # A holder that looks dead (or is the caller): decide with the rows locked.
            *_, decided = ex.run_batch(
                self._statements("LOCK_LEASE", "LOCK_SESSIONS", "TAKE"), params, atomic=True
            )
            remaining, token = decided.rows[0]
        if remaining is None or remaining <= 0:
            return Acquired(None, None)
        return Acquired(int(remaining), None if token is None else int(token))

    def release(self, ex: Executor, session_id: str, name: str, token: int) -> tuple[bool, bool | None]:
        freed = ex.run(self._statement(RELEASE), {"sid": session_id, "name": name, "token": token}).rows
        # waiters are woken by NOTIFY: the engine learns of them as they refuse
        return bool(freed and freed[0][-1]), None

    def force_release(self, ex: Executor, name: str) -> bool:
        was_live, _ = ex.run(self._statement(FORCE_RELEASE), {"name": name}).rows[0]
        return bool(was_live)

    def owner(self, ex: Executor, name: str) -> Row | None:
        rows = ex.run(OWNER, {"name": name}).rows
        return rows[0] if rows else None

    def leases(self, ex: Executor, prefix: str) -> list[Row]:
        low, high = prefix_range(prefix)
        return ex.run(LEASES, {"low": low, "high": high}).rows

    # -- groups -----------------------------------------------------------------------

    def join(self, ex: Executor, session_id: str, group: str) -> bool:
        _, joined = ex.run_batch(
            self._statements("SHARE_SESSION", "JOIN"), {"sid": session_id, "group": group}, atomic=True
        )
        live, _ = joined.rows[0]
        return bool(live)

    def leave(self, ex: Executor, session_id: str, group: str) -> bool:
        return bool(ex.run(self._statement(LEAVE), {"sid": session_id, "group": group}).rows)

    def members(self, ex: Executor, group: str) -> list[Row]:
        return ex.run(MEMBERS, {"group": group}).rows

    def groups(self, ex: Executor, prefix: str) -> list[Row]:
        low, high = prefix_range(prefix)
        return ex.run(GROUPS, {"low": low, "high": high}).rows

    # -- errors -----------------------------------------------------------------------

    def is_timeout(self, error: BaseException) -> bool:
        return getattr(error, "sqlstate", None) in TIMEOUT_STATES

    def is_deadlock(self, error: BaseException) -> bool:
        return getattr(error, "sqlstate", None) == DEADLOCK_DETECTED

    def is_missing_table(self, error: BaseException) -> bool:
        return getattr(error, "sqlstate", None) == UNDEFINED_TABLE

    def is_disconnect(self, error: BaseException) -> bool:
        import psycopg

        if not isinstance(error, psycopg.OperationalError):
            return False
        state = getattr(error, "sqlstate", None)
        # No state: the socket broke. 08: connection exceptions. 57P: the server shut the session.
        return state is None or state.startswith(("08", "57P"))

    def check_driver(self, engine: Any) -> None:
        if not getattr(engine, "is_psycopg3", False):
            raise ConfigurationError("the database backend needs psycopg 3 on PostgreSQL, not psycopg2")


class PolledPostgresqlBackend(DatabaseBackend):
    """PostgreSQL through a pooler in transaction mode, with no direct connection to LISTEN on
    (``listen``): LISTEN cannot work through the pooler, so the engine polls, as on MySQL.

    Its releases send no NOTIFY either: PostgreSQL commits notifying transactions one at a
    time, which would cap a fleet's releases at one per commit flush. A process of the same
    fleet that does listen learns of them at its next retry instead.
    """

    vendor = "postgresql"

    def _make_dialect(self, options: DatabaseOptions) -> PostgresqlDialect:
        # Nobody listens behind the pooler: the releases send no NOTIFY.
        return PostgresqlDialect(
            transaction_pooling=options.transaction_pooling, timeout=self.timeout, notify=False
        )


class PostgresqlBackend(DatabaseBackend):
    """PostgreSQL 14+: releases and group changes arrive through LISTEN/NOTIFY.

    The listening connection goes to the alias, or to ``listen``'s settings merged over the
    alias's (a direct connection, when the alias goes through PgBouncer).
    """

    vendor = "postgresql"
    notifies = True

    def __init__(self, options: Mapping[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT):
        super().__init__(options, timeout=timeout)
        parsed = parse_options(self.options)
        if parsed.transaction_pooling and parsed.listen is None:
            raise ConfigurationError(
                "LISTEN cannot work through a pooler in transaction mode: give the option 'listen' (a"
                ' direct connection), or use PolledPostgresqlBackend (the "database" backend picks it)'
            )
        listen = parsed.listen or {}

        def listen_settings() -> dict[str, Any]:
            # Read at every connect: the alias may point elsewhere now (a test database).
            merged = {**self._settings, **listen}
            merged["OPTIONS"] = {**self._settings["OPTIONS"], **listen.get("OPTIONS", {})}
            return merged

        self._subscribers: list[NotificationListener] = []
        self._watched_leases: set[str] = set()
        self._watched_groups: set[str] = set()
        self._watch_lock = threading.Lock()
        self._listener = PostgresListener(
            # LISTEN and a ping are all it sends: nothing to prepare or set.
            lambda: self._open_link(listen_settings(), _autocommit),
            self._on_payload,
            lambda: self._publish(Notification(NotificationKind.RESYNC)),
            timeout=self.timeout,
            watchdog=self._watchdog,
        )

    def _make_dialect(self, options: DatabaseOptions) -> PostgresqlDialect:
        return PostgresqlDialect(transaction_pooling=options.transaction_pooling, timeout=self.timeout)

    def subscribe(self, listener: NotificationListener) -> None:
        with self._watch_lock:
            self._subscribers.append(listener)
        self._listener.start()

    def watch_lease(self, name: str) -> None:
        self._watch(self._watched_leases, name, lease_channel(name), add=True)

    def unwatch_lease(self, name: str) -> None:
        self._watch(self._watched_leases, name, lease_channel(name), add=False)

    def watch_group(self, group: str) -> None:
        self._watch(self._watched_groups, group, group_channel(group), add=True)

    def unwatch_group(self, group: str) -> None:
        self._watch(self._watched_groups, group, group_channel(group), add=False)

    def _watch(self, watched: set[str], name: str, channel: str, *, add: bool) -> None:
        """Change what is watched; a new watch returns once its channel is listened on."""
        with self._watch_lock:
            if add == (name in watched):
                return
            if add:
                watched.add(name)
            else:
                watched.discard(name)
            ticket = self._listener.want(channel, add)
        if add:
            # A release right after this returns must be heard: it is the caller's cue to look again.
            self._listener.wait_applied(ticket)

    @property
    def notifying(self) -> bool:
        return self._listener.live

    def _on_payload(self, payload: str) -> None:
        with self._watch_lock:
            if payload.startswith(RELEASED_PREFIX):
                name, watched, kind = (
                    payload[len(RELEASED_PREFIX) :],
                    self._watched_leases,
                    NotificationKind.RELEASED,
                )
            elif payload.startswith(GROUP_PREFIX):
                name, watched, kind = (
                    payload[len(GROUP_PREFIX) :],
                    self._watched_groups,
                    NotificationKind.GROUP_CHANGED,
                )
            else:
                return
            if name not in watched:
                return
        self._publish(Notification(kind, name))

    def _publish(self, event: Notification) -> None:
        with self._watch_lock:
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            try:
                subscriber(event)
            except Exception:  # one listener's bug must not silence the others
                logger.exception("notification listener %r failed on %s", subscriber, event)

    def _settings_changed(self) -> None:
        # LISTEN where the releases are now sent; the reconnection makes the engine look again.
        with self._watch_lock:
            listening = bool(self._subscribers)
        if listening:
            self._listener.stop()
            self._listener.start()

    def close(self) -> None:
        """Stop listening too: until ``subscribe`` is called again, the engine polls."""
        self._listener.stop()
        with self._watch_lock:
            self._subscribers.clear()
            self._watched_leases.clear()
            self._watched_groups.clear()
            self._listener.forget_channels()
        super().close()

    def after_fork(self) -> None:
        super().after_fork()
        self._watch_lock = threading.Lock()
        self._listener.after_fork()
        if self._subscribers:
            self._listener.start()


def _autocommit(wrapper: Any) -> None:
    wrapper.connection.autocommit = True
