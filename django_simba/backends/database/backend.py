"""The database backend: sessions, leases and groups in three tables, through Django's databases.

``DatabaseBackend({"alias": "default"}, timeout=5)`` builds the backend of the
alias's vendor (PostgreSQL, MySQL/MariaDB or SQLite). It opens connections of
its own from the alias's settings, in autocommit, so nothing it writes belongs
to a caller's transaction. It follows the alias's settings as they are at each
call, not as they were when it was built: a test runner switches an alias to its
test database after the app (and maybe the backend) is loaded. Every decision
about time is made in SQL, on the database's clock; the application host's clock
is never read.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, router
from django.db import Error as DjangoDatabaseError
from django.db.utils import load_backend

from ...routers import SimbaRouter
from ...spi import (
    DEFAULT_TIMEOUT,
    BackendTimeout,
    BackendUnavailable,
    ConfigurationError,
    Grant,
    LeaseBackend,
    LeaseInfo,
    Member,
    Notification,
    NotificationKind,
    NotificationListener,
    OpenedSession,
    Released,
    Renewal,
    SessionExpired,
    SessionInfo,
    SimbaError,
)
from .dialects import Dialect, dialect_for
from .dialects.base import Executor, Traffic
from .dialects.postgresql import GROUP_PREFIX, RELEASED_PREFIX, group_channel, lease_channel
from .options import parse_options
from .pool import Link, LinkPool, PoolExhausted
from .watchdog import Alarm, Watchdog

logger = logging.getLogger(__name__)

#: A call whose transaction a deadlock rolled back is sent again this many times (nothing of it
#: was applied, so a retry is safe; InnoDB picks victims among our own keep-alives and take-overs).
DEADLOCK_RETRIES = 2

T = TypeVar("T")

# Ids this backend hands out are 32 hex digits; anything else cannot name one of its sessions.
_SESSION_ID = re.compile(r"[0-9A-Za-z]{1,32}\Z")


def _milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _vendor(alias: str) -> str:
    from django.db import connections

    if alias not in connections.settings:
        raise ConfigurationError(f"the database backend's alias {alias!r} is not in settings.DATABASES")
    backend = load_backend(connections.settings[alias]["ENGINE"])
    return str(backend.DatabaseWrapper.vendor)


class DatabaseBackend(LeaseBackend):
    """Leases over a Django database alias; instances are of the alias's vendor subclass.

    Options: see :mod:`.options` (the alias, the pool's bounds, PgBouncer's transaction pooling).
    """

    needs_purge = True
    vendor: ClassVar[str] = "database"
    uses_tables = True
    options_check_id = "django_simba.E012"

    @classmethod
    def options_hint(cls) -> str:
        from django.conf import settings

        return f"'alias' must be one of DATABASES: {', '.join(settings.DATABASES)}."

    @classmethod
    def tables_alias(cls, options: Mapping[str, Any]) -> str:
        return parse_options(options).alias

    def __new__(cls, options: Mapping[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT) -> Any:
        if cls is DatabaseBackend:
            parsed = parse_options(options)
            vendor = _vendor(parsed.alias)
            if vendor == "postgresql" and parsed.transaction_pooling and parsed.listen is None:
                cls = PolledPostgresqlBackend  # LISTEN cannot work through the pooler
            else:
                for subclass in (PostgresqlBackend, MysqlBackend, SqliteBackend):
                    if subclass.vendor == vendor:
                        cls = subclass
                        break
                else:
                    dialect_for(vendor)  # raises ConfigurationError naming the vendor
        return super().__new__(cls)

    def __init__(self, options: Mapping[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT):
        super().__init__(options, timeout=timeout)
        self.alias = parse_options(self.options).alias
        vendor = _vendor(self.alias)
        parsed = parse_options(self.options, vendor=vendor)
        if type(self).vendor not in ("database", vendor):
            raise ConfigurationError(f"{type(self).__name__} cannot serve alias {self.alias!r} ({vendor})")
        self.dialect: Dialect = dialect_for(
            vendor,
            transaction_pooling=parsed.transaction_pooling,
            timeout=self.timeout,
            # The polled PostgreSQL backend listens nowhere, and neither do its peers.
            notify=type(self) is not PolledPostgresqlBackend,
        )
        #: Round trips and statements sent, for tests and benchmarks.
        self.traffic = Traffic()
        self._settings_lock = threading.Lock()
        self._source = _snapshot(self._alias_settings())
        self._settings = self._connection_settings(self._source)
        self._engine = load_backend(self._settings["ENGINE"])
        if vendor == "postgresql" and not getattr(self._engine, "is_psycopg3", False):
            raise ConfigurationError("the database backend needs psycopg 3 on PostgreSQL, not psycopg2")
        self._driver_errors: tuple[type[BaseException], ...] = (
            self._engine.Database.Error,
            DjangoDatabaseError,
            OSError,
        )
        self._pool = LinkPool(self._connect, parsed.max_idle_connections, parsed.max_connections)
        self._watchdog = Watchdog()
        # Server-side timeouts end a call at ``timeout``; the watchdog only catches the rest.
        self._call_limit = self.timeout + max(0.25, self.timeout / 4)

    # -- connections --------------------------------------------------------------------

    def _alias_settings(self) -> dict[str, Any]:
        """The alias's settings now (every thread's connections share this one dict)."""
        from django.db import connections

        return connections.settings[self.alias]  # type: ignore[no-any-return]

    def _connection_settings(self, source: dict[str, Any]) -> dict[str, Any]:
        """The alias's settings adapted for our connections."""
        settings = _snapshot(source)
        options = dict(settings.get("OPTIONS") or {})
        settings["OPTIONS"] = self.dialect.connection_options(options, self.timeout)
        settings["AUTOCOMMIT"] = True
        settings["CONN_HEALTH_CHECKS"] = False
        return settings

    def _connect(self) -> Link:
        return self._open_link(self._settings, lambda wrapper: self.dialect.configure(wrapper, self.timeout))

    def _open_link(self, settings: dict[str, Any], configure: Callable[[Any], None]) -> Link:
        wrapper = self._engine.DatabaseWrapper(dict(settings), self.alias)
        link = Link(wrapper, self.dialect.executor(None, self.traffic))
        try:
            wrapper.ensure_connection()  # bounded by the driver's connect timeout
            link.executor.raw = wrapper.connection
            link.interrupt = self.dialect.interrupter(wrapper.connection)
            with self._watchdog.guard(self._call_limit, link.interrupt):
                configure(wrapper)
        except BaseException:
            link.close()
            raise
        return link

    def _run(self, operation: Callable[[Executor], T]) -> T:
        """Run one operation on a pooled connection, within the call's deadline.

        A pooled connection found dead (the server restarted, an idle timeout, a
        killed backend) is replaced once by a new one, after closing the other idle
        ones (they likely died the same way); a connection that failed in any way is
        closed, never reused.
        """
        for attempt in range(DEADLOCK_RETRIES + 1):
            try:
                return self._run_once(operation)
            except _Deadlock as deadlock:
                if attempt == DEADLOCK_RETRIES:
                    raise self._translate(deadlock.error) from deadlock.error
        raise AssertionError("unreachable")

    def _run_once(self, operation: Callable[[Executor], T]) -> T:
        link = self._take()
        try:
            return self._call(link, operation)
        except _DeadConnection as dead:
            if not link.reused:
                raise self._translate(dead.error) from dead.error
        self._pool.drop_idle()
        try:
            return self._call(self._take(), operation)
        except _DeadConnection as dead:
            raise self._translate(dead.error) from dead.error

    def _follow_settings(self) -> None:
        """Connect where the alias points now: pooled connections to where it pointed are retired."""
        current = self._alias_settings()
        if current == self._source:
            return
        with self._settings_lock:
            if current == self._source:
                return
            settings = self._connection_settings(current)
            if settings["ENGINE"] != self._settings["ENGINE"]:
                raise ConfigurationError(
                    f"database {self.alias!r} changed its ENGINE to {settings['ENGINE']!r}:"
                    " build a new backend"
                )
            logger.info("database %r now points at %r; reconnecting", self.alias, settings.get("NAME"))
            self._source, self._settings = _snapshot(current), settings
            self._pool.close()  # idle connections now, busy ones as they come back
        self._settings_changed()

    def _settings_changed(self) -> None:
        """Hook: the alias now points elsewhere (connections of other kinds reconnect)."""

    def _take(self) -> Link:
        self._follow_settings()
        try:
            return self._pool.take(self.timeout)
        except PoolExhausted as error:
            raise BackendTimeout(f"database {self.alias!r}: {error} (max_connections)") from error
        except self._driver_errors as error:
            raise self._translate(error) from error
        except ImproperlyConfigured as error:
            raise ConfigurationError(f"database {self.alias!r}: {error}") from error

    def _call(self, link: Link, operation: Callable[[Executor], T]) -> T:
        alarm: Alarm | None = None
        try:
            with self._watchdog.guard(self._call_limit, link.interrupt) as alarm:
                result = operation(link.executor)
        except self._driver_errors as error:
            self._pool.discard(link)
            if alarm is not None and alarm.fired:
                raise BackendTimeout(
                    f"database {self.alias!r} did not answer within {self.timeout:g} s"
                ) from error
            if self.dialect.is_disconnect(_cause(error)):
                raise _DeadConnection(error) from error
            if self.dialect.is_deadlock(_cause(error)):
                raise _Deadlock(error) from error
            raise self._translate(error) from error
        except BaseException:
            self._pool.discard(link)
            raise
        self._pool.give_back(link)
        return result

    def _translate(self, error: BaseException) -> SimbaError:
        cause = _cause(error)
        where = f"database {self.alias!r} ({self.dialect.vendor})"
        if self.dialect.is_timeout(cause):
            return BackendTimeout(f"{where} timed out after {self.timeout:g} s: {cause}")
        if self.dialect.is_missing_table(cause):
            return BackendUnavailable(
                f"{where} has no django_simba tables: run `manage.py migrate django_simba"
                f" --database {self.alias}` ({cause})"
            )
        return BackendUnavailable(f"{where}: {cause}")

    # -- sessions -----------------------------------------------------------------------

    def _open_session(self, lease_duration: float, metadata: str) -> OpenedSession:
        session_id = uuid.uuid4().hex
        lease = _milliseconds(lease_duration)
        remaining = self._run(lambda ex: self.dialect.open_session(ex, session_id, lease, metadata))
        return OpenedSession(session_id, remaining / 1000)

    def _keep_alive(self, session_id: str, lease_duration: float) -> Renewal:
        if not _SESSION_ID.match(session_id):
            raise SessionExpired(session_id)
        lease = _milliseconds(lease_duration)
        renewed = self._run(lambda ex: self.dialect.keep_alive(ex, session_id, lease))
        if renewed.remaining_ms is None:
            try:  # lazy cleanup: free what the dead session still holds
                self._remove([session_id])
            except BackendUnavailable:
                logger.warning("could not remove expired session %s; purge will", session_id, exc_info=True)
            raise SessionExpired(session_id)
        return Renewal(renewed.remaining_ms / 1000, renewed.owned)

    def _close_session(self, session_id: str) -> None:
        if _SESSION_ID.match(session_id):
            self._remove([session_id])

    def _remove(self, session_ids: list[str]) -> int:
        return self._run(lambda ex: self.dialect.remove_sessions(ex, session_ids)).sessions

    def _sessions(self) -> list[SessionInfo]:
        rows = self._run(self.dialect.sessions)
        return [SessionInfo(sid, remaining / 1000, metadata) for sid, remaining, metadata in rows]

    def _purge_expired(self, limit: int) -> int:
        expired = self._run(lambda ex: self.dialect.expired_sessions(ex, limit))
        if not expired:
            return 0
        return self._run(lambda ex: self.dialect.purge_sessions(ex, expired)).sessions

    # -- leases -------------------------------------------------------------------------

    def _acquire(self, session_id: str, name: str, wait: bool) -> Grant | None:
        if not _SESSION_ID.match(session_id):
            raise SessionExpired(session_id)
        acquired = self._run(lambda ex: self.dialect.acquire(ex, session_id, name))
        if acquired.remaining_ms is None:
            raise SessionExpired(session_id)
        if acquired.token is None:
            return None
        return Grant(name, acquired.token, acquired.remaining_ms / 1000)

    def _release(self, session_id: str, name: str, token: int | None) -> Released:
        if not _SESSION_ID.match(session_id):
            return Released(held=False)  # no session of ours ever had that id
        attempts = 0

        def release(ex: Executor) -> tuple[bool, bool | None]:
            nonlocal attempts
            attempts += 1
            return self.dialect.release(ex, session_id, name, token or 0)

        freed, contended = self._run(release)
        # Nothing freed on a retry (the connection died under the first try) may be the first
        # try's work: the term was ours then, so its end cannot be called a loss.
        held = True if freed else (False if attempts == 1 else None)
        return Released(held=held, contended=contended)

    def _force_release(self, name: str) -> bool:
        return self._run(lambda ex: self.dialect.force_release(ex, name))

    def _owner(self, name: str) -> LeaseInfo | None:
        row = self._run(lambda ex: self.dialect.owner(ex, name))
        if row is None:
            return None
        session_id, token, remaining, metadata = row
        return LeaseInfo(name, session_id, int(token), remaining / 1000, metadata)

    def _leases(self, prefix: str) -> list[LeaseInfo]:
        rows = self._run(lambda ex: self.dialect.leases(ex, prefix))
        return [
            LeaseInfo(name, sid, int(token), remaining / 1000, metadata)
            for name, sid, token, remaining, metadata in rows
        ]

    # -- groups -------------------------------------------------------------------------

    def _join(self, session_id: str, group: str) -> None:
        if not _SESSION_ID.match(session_id) or not self._run(
            lambda ex: self.dialect.join(ex, session_id, group)
        ):
            raise SessionExpired(session_id)

    def _leave(self, session_id: str, group: str) -> None:
        if _SESSION_ID.match(session_id):
            self._run(lambda ex: self.dialect.leave(ex, session_id, group))

    def _members(self, group: str) -> list[Member]:
        rows = self._run(lambda ex: self.dialect.members(ex, group))
        return [Member(sid, metadata) for sid, metadata in rows]

    def _groups(self, prefix: str) -> dict[str, list[Member]]:
        found: dict[str, list[Member]] = {}
        for group, sid, metadata in self._run(lambda ex: self.dialect.groups(ex, prefix)):
            found.setdefault(group, []).append(Member(sid, metadata))
        return found

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        self._pool.close()
        self._watchdog.stop()

    def after_fork(self) -> None:
        # Locks held by the parent's other threads at the fork would never be released here.
        self._pool.after_fork()
        self._watchdog.after_fork()
        self.traffic.after_fork()

    def connection_count(self) -> int:
        """Connections open for calls (idle or busy), not counting a notification listener."""
        return self._pool.count()


class MysqlBackend(DatabaseBackend):
    """MySQL 8 / MariaDB 10.11+: no notifications; the engine polls."""

    vendor = "mysql"


class SqliteBackend(DatabaseBackend):
    """SQLite (a file shared by the processes of one host): no notifications; the engine polls.

    The process's own calls take turns on a lock: left to SQLite's busy handler,
    which sleeps and retries in no order, a thread cycling a lock can starve the
    keep-alive thread of the same process until its session expires.

    SQLite lets one connection write at a time. While the caller's thread has a
    transaction open on the database of the tables, a call waits only briefly
    for the database's lock: if the transaction holds it (it wrote, or in the
    rollback journal mode it read), the call would wait for the transaction,
    which waits for the call. It fails instead, saying how to give the tables a
    database of their own (``django_simba.routers``).
    """

    vendor = "sqlite"

    def __init__(self, options: Mapping[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT):
        super().__init__(options, timeout=timeout)
        from .dialects.sqlite import SqliteDialect

        assert isinstance(self.dialect, SqliteDialect)
        self.dialect.lock_wait = self.timeout
        self._turn = threading.Lock()
        self._sharing: tuple[Any, list[str]] = (None, [])  # (what it was worked out for, aliases)

    def _run(self, operation: Callable[[Executor], T]) -> T:
        inside = self._callers_transaction()
        wait = self.timeout if inside is None else min(self.timeout, CALLERS_TRANSACTION_WAIT)
        if not self._turn.acquire(timeout=wait):
            if inside is not None:  # most likely held by a call that waits for the caller's transaction
                raise _inside_transaction(inside)
            raise BackendTimeout(
                f"database {self.alias!r}: no turn for this process's SQLite call within {self.timeout:g} s"
            )
        try:
            if inside is None:
                return super()._run(operation)
            return super()._run(functools.partial(_waiting_briefly, operation, wait, inside))
        finally:
            self._turn.release()

    def _callers_transaction(self) -> str | None:
        """The alias on the tables' file in which the calling thread has a transaction open, if any."""
        from django.db import connections

        for alias in self._aliases_sharing_the_file():
            if _in_transaction(connections[alias]):
                return alias
        return None

    def _aliases_sharing_the_file(self) -> list[str]:
        """The aliases on the database of the tables, whose transactions would block the calls.

        Worked out again only when an alias's database changes (a test database), since it
        resolves paths. A dedicated alias (routed by the router, which keeps every other table
        out of it) is left out: a transaction on it, as a test case opens around each test,
        writes nothing there and holds no lock.
        """
        from django.db import connections

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
        self._turn = threading.Lock()  # another thread of the parent may have held it


def sqlite_identity(name: Any) -> str | None:
    """What makes two SQLite NAMEs the same database; None for a private in-memory one."""
    text = str(name)
    if not text or text == ":memory:":
        return None
    if text.startswith("file:"):
        return text  # a URI, such as a shared in-memory test database
    return os.path.realpath(text)


#: Inside a transaction of the caller's on the tables' SQLite file, how long a call waits for the
#: database's lock (or this process's turn) before concluding that the transaction holds it.
CALLERS_TRANSACTION_WAIT = 0.25


def _waiting_briefly(operation: Callable[[Executor], T], wait: float, alias: str, executor: Executor) -> T:
    from .dialects.sqlite import SqliteExecutor, locked

    assert isinstance(executor, SqliteExecutor)
    saved, executor.lock_wait = executor.lock_wait, wait
    try:
        return operation(executor)
    except Exception as error:
        if locked(error):
            raise _inside_transaction(alias) from error
        raise
    finally:
        executor.lock_wait = saved


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


class PolledPostgresqlBackend(DatabaseBackend):
    """PostgreSQL through a pooler in transaction mode, with no direct connection to LISTEN on
    (``listen``): LISTEN cannot work through the pooler, so the engine polls, as on MySQL.

    Its releases send no NOTIFY either: PostgreSQL commits notifying transactions one at a
    time, which would cap a fleet's releases at one per commit flush. A process of the same
    fleet that does listen learns of them at its next retry instead.
    """

    vendor = "postgresql"


class PostgresqlBackend(DatabaseBackend):
    """PostgreSQL 14+: releases and group changes arrive through LISTEN/NOTIFY.

    The listening connection goes to the alias, or to ``listen``'s settings merged over the
    alias's (a direct connection, when the alias goes through PgBouncer).
    """

    vendor = "postgresql"
    notifies = True

    def __init__(self, options: Mapping[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT):
        super().__init__(options, timeout=timeout)
        from .listener import PostgresListener

        parsed = parse_options(self.options)
        if parsed.transaction_pooling and parsed.listen is None:
            raise ConfigurationError(
                "LISTEN cannot work through a pooler in transaction mode: give the option 'listen' (a"
                " direct connection), or build DatabaseBackend, which then polls"
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


class _DeadConnection(Exception):
    """The connection was lost; the call may be retried once on a new one."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


class _Deadlock(Exception):
    """The server rolled the call's transaction back to break a deadlock: nothing of it was applied."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


def _autocommit(wrapper: Any) -> None:
    wrapper.connection.autocommit = True


def _snapshot(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a database's settings that later changes to them (OPTIONS and TEST too) leave alone."""
    return {key: dict(value) if isinstance(value, dict) else value for key, value in settings.items()}


def _cause(error: BaseException) -> BaseException:
    """The driver's own error behind Django's wrapper of it."""
    if isinstance(error, DjangoDatabaseError) and error.__cause__ is not None:
        return error.__cause__
    return error
