"""Fixtures for the database backend's tests against real PostgreSQL, MariaDB and SQLite.

A test names its database alias ("sqlite", "postgresql", "mysql" from
``tests/settings.py``) with :func:`on` (a class or a ``pytest.param``). Test
databases are created by pytest-django only for servers that answer; a test
on a server that does not answer calls ``server_missing`` (skip, or fail
under ``SIMBA_REQUIRE_SERVERS=1``).
"""

from __future__ import annotations

import functools
import re
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import load_backend

from django_simba.backends.database import AnyDatabaseBackend, DatabaseBackend
from tests.backends.building import closing_all
from tests.conftest import server_missing
from tests.servers import pgbouncer as pgbouncer_server

ALIASES = ("sqlite", "postgresql", "mysql")
SERVER_NAMES = {"postgresql": "PostgreSQL", "mysql": "MariaDB/MySQL"}


#: The thread of a transaction in InnoDB's monitor (SHOW ENGINE INNODB STATUS), MySQL or MariaDB.
_INNODB_THREAD = re.compile(r"(?:MySQL|MariaDB) thread id (\d+)")


class Rollback(Exception):
    """Raised in an ``atomic()`` block to roll it back on purpose."""


@functools.cache
def reachable(alias: str) -> bool:
    if alias == "sqlite":
        return True
    database = settings.DATABASES.get(alias)
    if database is None:
        return False  # its driver is not installed (tests/settings.py)
    try:
        socket.create_connection((database["HOST"], int(database["PORT"])), timeout=2).close()
    except OSError:
        return False
    return True


def on(alias: str) -> list[pytest.MarkDecorator]:
    """Marks of a test on ``alias``: its server marker, and its test database when reachable."""
    marks = [getattr(pytest.mark, alias)] if alias in SERVER_NAMES else []
    if reachable(alias):
        # "default" too: Django's test setup makes every other alias depend on it.
        marks.append(
            pytest.mark.django_db(
                databases=["default", alias], transaction=True, available_apps=["django_simba"]
            )
        )
    return marks


def each_alias() -> list[Any]:
    """``parametrize("alias", each_alias())``: one test per database."""
    return [pytest.param(alias, marks=on(alias), id=alias) for alias in ALIASES]


@pytest.fixture
def alias(request: pytest.FixtureRequest) -> str:
    """The test's alias (its parameter, or its class's ``alias``), its server checked."""
    name: str = getattr(request, "param", None) or request.cls.alias
    if name not in settings.DATABASES:
        server_missing(f"{SERVER_NAMES[name]} (its driver is not installed: the test-integration extra)")
    if not reachable(name):
        server_missing(SERVER_NAMES[name])
    return name


@pytest.fixture
def make_backend(alias: str) -> Iterator[Callable[..., DatabaseBackend]]:
    """Build backends on the test's alias; every one is closed after the test."""

    def build(timeout: float = 5.0, **options: Any) -> DatabaseBackend:
        return AnyDatabaseBackend.build({"alias": alias, **options}, timeout=timeout)

    yield from closing_all(build)


@pytest.fixture
def backend(make_backend: Callable[..., DatabaseBackend]) -> DatabaseBackend:
    return make_backend()


class BackendEach:
    """For the engine kits: each engine (each process) on a backend of its own, on the test's alias."""

    @pytest.fixture
    def backend(self, make_backend: Callable[..., DatabaseBackend]) -> DatabaseBackend:
        return make_backend()

    @pytest.fixture
    def other_backend(self, make_backend: Callable[..., DatabaseBackend]) -> DatabaseBackend:
        return make_backend()


@pytest.fixture(scope="session")
def pgbouncer(django_db_setup: Any) -> Iterator[pgbouncer_server.Pgbouncer]:
    """A PgBouncer in transaction mode in front of the tests' PostgreSQL.

    Stopped before the test databases are dropped (it holds server connections to them).
    """
    if not reachable("postgresql"):
        server_missing(SERVER_NAMES["postgresql"])
    reason = pgbouncer_server.ensure_installed()
    if reason:
        server_missing(reason)
    database = settings.DATABASES["postgresql"]
    with pgbouncer_server.pgbouncer(database["HOST"], int(database["PORT"]), [database["USER"]]) as bouncer:
        yield bouncer


@pytest.fixture
def through_pgbouncer(pgbouncer: pgbouncer_server.Pgbouncer) -> Iterator[dict[str, Any]]:
    """The "postgresql" alias goes through PgBouncer for the test; yields the backend's options.

    The alias's settings are changed in place (Django's connections share that dict), so the
    backend built on it, and any process the test spawns, connects through PgBouncer. The
    options turn transaction pooling on and give the direct address for LISTEN; drop
    ``listen`` to have the engine poll.
    """
    database = connections.settings["postgresql"]
    direct = {"HOST": database["HOST"], "PORT": database["PORT"]}
    database.update(HOST=pgbouncer.host, PORT=str(pgbouncer.port))
    try:
        yield {"alias": "postgresql", "transaction_pooling": True, "listen": dict(direct)}
    finally:
        database.update(direct)


@pytest.fixture
def outsider(alias: str) -> Iterator[Outsider]:
    """Another client of the same database (a connection of its own), for locks and probes."""
    other = Outsider(alias)
    yield other
    other.close()


class Outsider:
    """A separate connection that takes locks and reads state the way another process would."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        settings_dict = dict(connections[alias].settings_dict)
        self.wrapper: BaseDatabaseWrapper = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(
            settings_dict, alias
        )
        self.wrapper.ensure_connection()
        self.raw = self.wrapper.connection
        self.vendor = self.wrapper.vendor
        if self.vendor == "sqlite":
            self.raw.isolation_level = None
        elif self.vendor == "mysql":
            self.raw.autocommit(True)
        else:
            self.raw.autocommit = True
        self._lock = threading.Lock()

    @property
    def placeholder(self) -> str:
        return "?" if self.vendor == "sqlite" else "%s"

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run ``sql`` written with ``%s`` placeholders (translated for SQLite)."""
        if self.vendor == "sqlite":
            sql = sql.replace("%s", "?")
        with self._lock:
            cursor = self.raw.cursor()
            try:
                cursor.execute(sql, params)
                return list(cursor.fetchall()) if cursor.description else []
            finally:
                cursor.close()

    def begin(self) -> None:
        self.execute("BEGIN IMMEDIATE" if self.vendor == "sqlite" else "BEGIN")

    def commit(self) -> None:
        self.execute("COMMIT")

    def rollback(self) -> None:
        self.execute("ROLLBACK")

    def now_ms(self) -> str:
        """SQL for the database's clock in epoch milliseconds."""
        if self.vendor == "postgresql":
            return "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
        if self.vendor == "mysql":
            return "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)"
        return "CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"

    def share_lock_session(self, session_id: str) -> None:
        """Read a session row in share mode, as a take-over does (inside :meth:`begin`)."""
        if self.vendor == "postgresql":
            self.execute("SELECT 1 FROM simba_session WHERE session_id = %s FOR SHARE", (session_id,))
        elif self.vendor == "mysql":
            self.execute(
                "SELECT 1 FROM simba_session WHERE session_id = %s LOCK IN SHARE MODE", (session_id,)
            )

    def lock_lease(self, name: str) -> None:
        """Lock a lease row for update, as a take-over or a release does (inside :meth:`begin`)."""
        if self.vendor != "sqlite":  # SQLite's begin() took the database's write lock already
            self.execute("SELECT 1 FROM simba_lease WHERE name = %s FOR UPDATE", (name,))

    def session_expired(self, session_id: str) -> bool:
        """The session's expiry has passed on the database's clock (a read that waits for no lock)."""
        rows = self.execute(
            f"SELECT expires_at <= {self.now_ms()} FROM simba_session WHERE session_id = %s", (session_id,)
        )
        return bool(rows and rows[0][0])

    def lock_session(self, session_id: str) -> None:
        """Lock a session row for update, as its keep-alive does (inside :meth:`begin`)."""
        self.execute("UPDATE simba_session SET expires_at = expires_at WHERE session_id = %s", (session_id,))

    def server_connections(self) -> int:
        """Connections to this database on the server, this one included (PostgreSQL, MySQL)."""
        if self.vendor == "postgresql":
            sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        else:
            sql = "SELECT count(*) FROM information_schema.processlist WHERE db = DATABASE()"
        return int(self.execute(sql)[0][0])

    def lock_waiters(self) -> int:
        """How many other connections to this database wait for a row lock (0 on SQLite: it cannot tell)."""
        if self.vendor == "postgresql":
            rows = self.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
            return int(rows[0][0])
        if self.vendor == "mysql":
            return len(self._innodb_lock_waiters())
        return 0

    def _innodb_lock_waiters(self) -> set[int]:
        """The threads of other connections to this database that wait for a row lock.

        Read from InnoDB's monitor, which reports the locks as they are now: the lock tables of
        ``information_schema`` (``innodb_trx``) are a cache refreshed only once nobody has read
        it for 0.1 s, so with several test workers polling it on one server it stayed stale for
        seconds, and a call that was waiting was never seen to.
        """
        [(_, _, status)] = self.execute("SHOW ENGINE INNODB STATUS")
        waiting = {
            int(found.group(1))
            for block in status.split("---TRANSACTION ")[1:]
            if "LOCK WAIT" in block and (found := _INNODB_THREAD.search(block))
        }
        here = self.execute(
            "SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()"
        )
        return waiting & {int(thread) for (thread,) in here}

    def close(self) -> None:
        if self.raw is not None:
            try:
                if self.vendor == "sqlite" and self.raw.in_transaction:
                    self.raw.execute("ROLLBACK")
                self.raw.close()
            finally:
                self.raw = None
                self.wrapper.connection = None
