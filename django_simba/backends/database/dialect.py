"""What every SQL dialect provides: the statements of each operation and how to send them.

A dialect turns one backend operation into as few round trips as its driver
allows and returns plain values; the backend turns them into the SPI's replies.
Every time comparison happens inside the SQL, on the database's clock, in UTC
epoch milliseconds: nothing here reads the application host's clock.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar

Params = Mapping[str, Any]
Row = tuple[Any, ...]

#: A named parameter (``%(name)s``), as the dialects write their statements for the drivers.
NAMED_PARAMETER = re.compile(r"%\((\w+)\)s")


def named_parameters(sql: str) -> list[str]:
    """The named parameters of ``sql`` in order of appearance, repeats included."""
    return NAMED_PARAMETER.findall(sql)


#: Characters allowed in names sort below "~", so ``[prefix, prefix + "~")`` holds
#: exactly the names that start with ``prefix`` under a binary collation.
PREFIX_CEILING = "~"


@dataclass(slots=True)
class Result:
    """The rows (if any) and the row count of one statement."""

    rows: list[Row] = field(default_factory=list)
    rowcount: int = -1
    #: MySQL's insert id, which ``LAST_INSERT_ID(expr)`` sets: a value an UPDATE can report.
    last_id: int | None = None


@dataclass(slots=True)
class Traffic:
    """Round trips and statements sent, for tests and benchmarks."""

    round_trips: int = 0
    statements: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, statements: int) -> None:
        with self._lock:
            self.round_trips += 1
            self.statements += statements

    def snapshot(self) -> tuple[int, int]:
        with self._lock:
            return self.round_trips, self.statements

    def after_fork(self) -> None:
        self._lock = threading.Lock()


class Executor(ABC):
    """Sends SQL over one DB-API connection; one ``run`` or ``run_batch`` is one round trip."""

    def __init__(self, raw: Any, traffic: Traffic) -> None:
        self.raw = raw
        self.traffic = traffic

    @abstractmethod
    def run(self, sql: str, params: Params) -> Result:
        """One statement."""

    @abstractmethod
    def run_batch(self, statements: Sequence[str], params: Params, *, atomic: bool) -> list[Result]:
        """Several statements sent together (one round trip where the driver allows it).

        ``atomic``: all in one transaction. Each statement still reads the latest
        committed data (READ COMMITTED), which the take-over rules rely on.
        """


@dataclass(frozen=True, slots=True)
class Acquired:
    """What an acquire found: ``remaining_ms`` is None when the caller's session is not live."""

    remaining_ms: int | None
    token: int | None  # the caller's token when it holds the name, else None


@dataclass(frozen=True, slots=True)
class Renewed:
    """What a keep-alive found: ``remaining_ms`` is None when the session was not live."""

    remaining_ms: int | None
    owned: dict[str, int]


@dataclass(frozen=True, slots=True)
class Removed:
    """What removing sessions did: how many rows went, which names and groups they freed."""

    sessions: int
    released: list[str]
    groups: list[str]


class Dialect(ABC):
    """The SQL of one database family. Stateless; shared by every connection."""

    vendor: str = ""
    #: The purge's reclaim of idle lease rows (:meth:`reclaim_idle_leases`).
    reclaim: ClassVar[Sequence[str]] = ()
    #: Whether any lease row is idle (a read: :meth:`has_idle_leases`).
    any_idle: ClassVar[str] = ""

    @abstractmethod
    def executor(self, raw: Any, traffic: Traffic) -> Executor: ...

    @abstractmethod
    def configure(self, wrapper: Any, timeout: float) -> None:
        """Prepare a fresh connection: autocommit, READ COMMITTED, statement and lock timeouts."""

    def connection_options(self, options: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Driver options for the backend's own connections (e.g. a connect timeout)."""
        return options

    def check_driver(self, engine: Any) -> None:
        """Raise ConfigurationError when Django's ``engine`` module drives a client this SQL cannot use."""

    # -- sessions ---------------------------------------------------------------------

    @abstractmethod
    def open_session(self, ex: Executor, session_id: str, lease_ms: int, metadata: str) -> int:
        """Insert the session; return its remaining time in ms."""

    @abstractmethod
    def keep_alive(self, ex: Executor, session_id: str, lease_ms: int) -> Renewed: ...

    @abstractmethod
    def remove_sessions(self, ex: Executor, session_ids: Sequence[str]) -> Removed:
        """Free the sessions' leases (tokens kept), delete them and their memberships.

        Leases first, then sessions, then members: the lock order every other
        operation follows, so removal never deadlocks with an acquire or a join.
        """

    def purge_sessions(self, ex: Executor, session_ids: Sequence[str]) -> Removed:
        """Remove those of ``session_ids`` (found expired by a read) still expired once locked.

        A keep-alive that judged its session live may commit after the read found the
        session expired: that session is renewed, and stays. By default (a dialect whose
        writer waits for no renewal in flight) everything listed is removed.
        """
        return self.remove_sessions(ex, session_ids)

    def has_idle_leases(self, ex: Executor, idle_ms: int) -> bool:
        """Whether a lease row has been free for ``idle_ms`` or longer: the reclaim's write
        transaction is begun only then (on SQLite, in a test's shared in-memory database, any
        write of another connection makes the test's own write fail at once)."""
        return bool(ex.run(self.any_idle, {"idle": idle_ms}).rows[0][0])

    def reclaim_idle_leases(self, ex: Executor, idle_ms: int, settle_ms: int, limit: int) -> int:
        """Delete at most ``limit`` lease rows free for ``idle_ms`` or longer; return how many.

        Only rows whose tokens a floor covered ``settle_ms`` ago or earlier go, and every row
        made afterwards starts above the floor: a name's tokens never go back. The floor rises
        here, over the tokens of the rows idle now, at most once per ``settle_ms``
        (``reclaim``: the statements, in one transaction, the last one deleting).
        """
        params = {"idle": idle_ms, "settle": settle_ms, "limit": limit}
        *_, deleted = ex.run_batch(self.reclaim, params, atomic=True)
        return deleted.rowcount

    @abstractmethod
    def expired_sessions(self, ex: Executor, limit: int) -> list[str]:
        """Ids of at most ``limit`` expired sessions, oldest expiry first (the expiry index)."""

    @abstractmethod
    def sessions(self, ex: Executor) -> list[Row]:
        """``(session_id, remaining_ms, metadata)`` of every session."""

    # -- leases -----------------------------------------------------------------------

    @abstractmethod
    def acquire(self, ex: Executor, session_id: str, name: str) -> Acquired: ...

    @abstractmethod
    def release(self, ex: Executor, session_id: str, name: str, token: int) -> tuple[bool, bool | None]:
        """Free ``name`` if ``session_id`` holds it (only term ``token`` unless it is 0).

        Returns whether a row of the session's was freed, and whether another session was
        refused the name during the term, when the dialect tracks it (``None`` otherwise,
        and when nothing was freed). The polled dialects track it: their waiters cannot be
        told of a release, and the flag their refusals left lets the releaser step aside
        (the engine's courtesy), or one process could keep the name.
        """
        ...

    @abstractmethod
    def force_release(self, ex: Executor, name: str) -> bool:
        """Free ``name``; True when its holder was live."""

    @abstractmethod
    def owner(self, ex: Executor, name: str) -> Row | None:
        """``(session_id, token, remaining_ms, metadata)`` of the live holder."""

    @abstractmethod
    def leases(self, ex: Executor, prefix: str) -> list[Row]:
        """``(name, session_id, token, remaining_ms, metadata)`` of live holders."""

    # -- groups -----------------------------------------------------------------------

    @abstractmethod
    def join(self, ex: Executor, session_id: str, group: str) -> bool:
        """Add the membership; False when the session is not live."""

    @abstractmethod
    def leave(self, ex: Executor, session_id: str, group: str) -> bool: ...

    @abstractmethod
    def members(self, ex: Executor, group: str) -> list[Row]:
        """``(session_id, metadata)`` of live members."""

    @abstractmethod
    def groups(self, ex: Executor, prefix: str) -> list[Row]:
        """``(group, session_id, metadata)`` of live members of every group under ``prefix``."""

    # -- errors -----------------------------------------------------------------------

    def interrupter(self, raw: Any) -> Callable[[], None]:
        """How to end a call blocked on ``raw`` from another thread (the watchdog's last resort).

        Made when the connection opens: a driver may refuse to be asked anything,
        even its socket, while another thread is inside a call.
        """
        return partial(shut_down_socket, raw.fileno())

    @abstractmethod
    def is_timeout(self, error: BaseException) -> bool:
        """The driver error is a statement or lock-wait timeout."""

    @abstractmethod
    def is_missing_table(self, error: BaseException) -> bool: ...

    @abstractmethod
    def is_disconnect(self, error: BaseException) -> bool:
        """The connection is gone (the statement was not run, or its fate is unknown)."""

    def is_deadlock(self, error: BaseException) -> bool:
        """The server chose this transaction as a deadlock's victim and rolled all of it back."""
        return False


@dataclass(frozen=True, slots=True)
class Statements:
    """A dialect's SQL for the operations that MySQL and SQLite perform alike."""

    open_session: str
    renew: str
    owned: str
    expired: str
    sessions: str
    take: str
    mark_wanted: str  # after a take: the row says whether its holder turned someone away
    taken: str
    holder: str  # the holder's liveness, read (locked where the dialect can) before freeing
    free_lease: str
    owner: str
    leases: str
    leave: str
    members: str
    groups: str
    #: Locks the session's row before ``renew`` judges it, in the same transaction: a
    #: statement's clock is read before the locks it waits for. Empty where the write lock
    #: is taken before any clock is read (SQLite).
    lock_session: str = ""


class StatementDialect(Dialect):
    """A dialect whose common operations are one statement (or batch) each, named in ``sql``.

    Subclasses give their :class:`Statements` and the operations that differ
    (removing sessions, releasing, joining, error classification).
    """

    sql: ClassVar[Statements]

    def open_session(self, ex: Executor, session_id: str, lease_ms: int, metadata: str) -> int:
        ex.run(self.sql.open_session, {"sid": session_id, "lease": lease_ms, "metadata": metadata})
        return lease_ms

    def keep_alive(self, ex: Executor, session_id: str, lease_ms: int) -> Renewed:
        lock = [self.sql.lock_session] if self.sql.lock_session else []
        *_, renewed, owned = ex.run_batch(
            [*lock, self.sql.renew, self.sql.owned], {"sid": session_id, "lease": lease_ms}, atomic=bool(lock)
        )
        if renewed.rowcount != 1:
            return Renewed(None, {})
        return Renewed(lease_ms, {name: int(token) for name, token in owned.rows})

    def expired_sessions(self, ex: Executor, limit: int) -> list[str]:
        return [row[0] for row in ex.run(self.sql.expired, {"limit": limit}).rows]

    def sessions(self, ex: Executor) -> list[Row]:
        return ex.run(self.sql.sessions, {}).rows

    def acquire(self, ex: Executor, session_id: str, name: str) -> Acquired:
        statements = [self.sql.take, self.sql.mark_wanted, self.sql.taken]
        _, _, taken = ex.run_batch(statements, {"sid": session_id, "name": name}, atomic=True)
        remaining, token = taken.rows[0]
        if remaining is None or remaining <= 0:
            return Acquired(None, None)
        return Acquired(int(remaining), None if token is None else int(token))

    def force_release(self, ex: Executor, name: str) -> bool:
        holder, _ = ex.run_batch([self.sql.holder, self.sql.free_lease], {"name": name}, atomic=True)
        return bool(holder.rows and holder.rows[0][0])

    def owner(self, ex: Executor, name: str) -> Row | None:
        rows = ex.run(self.sql.owner, {"name": name}).rows
        return rows[0] if rows else None

    def leases(self, ex: Executor, prefix: str) -> list[Row]:
        low, high = prefix_range(prefix)
        return ex.run(self.sql.leases, {"low": low, "high": high}).rows

    def leave(self, ex: Executor, session_id: str, group: str) -> bool:
        return ex.run(self.sql.leave, {"sid": session_id, "group": group}).rowcount > 0

    def members(self, ex: Executor, group: str) -> list[Row]:
        return ex.run(self.sql.members, {"group": group}).rows

    def groups(self, ex: Executor, prefix: str) -> list[Row]:
        low, high = prefix_range(prefix)
        return ex.run(self.sql.groups, {"low": low, "high": high}).rows


def prefix_range(prefix: str) -> tuple[str, str]:
    """Bounds ``[low, high)`` of the names starting with ``prefix`` (binary collation)."""
    return prefix, prefix + PREFIX_CEILING


def shut_down_socket(descriptor: int) -> None:
    """Shut a connection's socket down: a blocked read returns at once with an error.

    Works on a duplicate of the descriptor, which stays the driver's to close.
    """
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(descriptor)) as sock:
        sock.shutdown(socket.SHUT_RDWR)
