"""What the database backend of every vendor shares: sessions, leases and groups in three tables.

Each vendor's module (``postgresql``, ``mysql``, ``sqlite``) holds its SQL and its
subclass of :class:`DatabaseBackend`; ``vendors`` picks the one an alias needs. The
backend opens connections of its own from the alias's settings, in autocommit, so nothing it writes belongs
to a caller's transaction. It follows the alias's settings as they are at each
call, not as they were when it was built: a test runner switches an alias to its
test database after the app (and maybe the backend) is loaded. Every decision
about time is made in SQL, on the database's clock; the application host's clock
is never read.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from abc import abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.db import Error as DjangoDatabaseError
from django.db import connections
from django.db.utils import load_backend

from ...spi import (
    DEFAULT_TIMEOUT,
    MAX_PURGE_LIMIT,
    BackendTimeout,
    BackendUnavailable,
    ConfigurationError,
    Grant,
    LeaseBackend,
    LeaseInfo,
    Member,
    OpenedSession,
    Released,
    Renewal,
    SessionExpired,
    SessionInfo,
    SimbaError,
)
from ...spi.patience import patience
from .dialect import Dialect, Executor, Traffic
from .options import DatabaseOptions, alias_vendor, parse_options
from .pool import Link, LinkPool, PoolExhausted
from .watchdog import Alarm, Watchdog

logger = logging.getLogger(__name__)

#: A call whose transaction a deadlock rolled back is sent again this many times (nothing of it
#: was applied, so a retry is safe; InnoDB picks victims among our own keep-alives and take-overs).
DEADLOCK_RETRIES = 2

#: A lease row free and unused this long is reclaimed by the purge: an idle name costs no row.
RECLAIM_IDLE = 600.0
#: The purge deletes a row only once a floor over its token was raised this long ago (at least
#: twice the backend's timeout, which bounds every statement): a statement that makes the row
#: again cannot have read the floor from before, so it starts above the row's tokens.
FLOOR_SETTLES = 600.0
#: Batches of at most ``limit`` idle rows one purge reclaims, each its own transaction.
RECLAIM_BATCHES = 10

T = TypeVar("T")

# Ids this backend hands out are 32 hex digits; anything else cannot name one of its sessions.
_SESSION_ID = re.compile(r"[0-9A-Za-z]{1,32}\Z")


def _milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))


class DatabaseBackend(LeaseBackend):
    """Leases over a Django database alias: the base of each vendor's backend, which gives its
    :class:`Dialect` (``_make_dialect``) and what else it does its own way.

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

    def __init__(self, options: Mapping[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT):
        super().__init__(options, timeout=timeout)
        self.alias = parse_options(self.options).alias
        vendor = alias_vendor(self.alias)
        parsed = parse_options(self.options, vendor=vendor)
        if type(self).vendor != vendor:
            raise ConfigurationError(f"{type(self).__name__} cannot serve alias {self.alias!r} ({vendor})")
        self.dialect: Dialect = self._make_dialect(parsed)
        #: Round trips and statements sent, for tests and benchmarks.
        self.traffic = Traffic()
        self._settings_lock = threading.Lock()
        self._source = _snapshot(self._alias_settings())
        self._settings = self._connection_settings(self._source)
        self._engine = load_backend(self._settings["ENGINE"])
        self.dialect.check_driver(self._engine)
        self._driver_errors: tuple[type[BaseException], ...] = (
            self._engine.Database.Error,
            DjangoDatabaseError,
            OSError,
        )
        #: How long a free row stays unused before the purge reclaims it, and how old the floor
        #: over its token must be (seconds; see RECLAIM_IDLE and FLOOR_SETTLES).
        self.reclaim_idle = RECLAIM_IDLE
        self.floor_settles = max(FLOOR_SETTLES, 2 * self.timeout)
        self._pool = LinkPool(self._connect, parsed.max_idle_connections, parsed.max_connections)
        self._watchdog = Watchdog()
        # Server-side timeouts end a call at ``timeout``; the watchdog only catches the rest.
        self._call_limit = self.timeout + max(0.25, self.timeout / 4)

    @abstractmethod
    def _make_dialect(self, options: DatabaseOptions) -> Dialect:
        """The SQL of this vendor, for these options."""

    # -- connections --------------------------------------------------------------------

    def _alias_settings(self) -> dict[str, Any]:
        """The alias's settings now (every thread's connections share this one dict)."""
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

    def _run(self, operation: Callable[[Executor], T], *, session: bool = False) -> T:
        """Run one operation on a pooled connection, within the call's deadline.

        ``session``: a call of the session (open, keep-alive), which never waits for a
        connection the callers' calls hold (see :mod:`.pool`).

        A pooled connection found dead (the server restarted, an idle timeout, a
        killed backend) is replaced once by a new one, after closing the other idle
        ones (they likely died the same way); a connection that failed in any way is
        closed, never reused.
        """
        for attempt in range(DEADLOCK_RETRIES + 1):
            try:
                return self._run_once(operation, session)
            except _Deadlock as deadlock:
                if attempt == DEADLOCK_RETRIES:
                    raise self._translate(deadlock.error) from deadlock.error
        raise AssertionError("unreachable")

    def _run_once(self, operation: Callable[[Executor], T], session: bool) -> T:
        link = self._take(session)
        try:
            return self._call(link, operation)
        except _DeadConnection as dead:
            if not link.reused:
                raise self._translate(dead.error) from dead.error
        self._pool.drop_idle()
        try:
            return self._call(self._take(session), operation)
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

    def _take(self, session: bool) -> Link:
        self._follow_settings()
        try:
            # A caller's call waits no longer than its caller does (its lock's timeout).
            return self._pool.take(patience(self.timeout), session=session)
        except PoolExhausted as error:
            raise BackendTimeout(f"database {self.alias!r}: {error}") from error
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
        remaining = self._run(
            lambda ex: self.dialect.open_session(ex, session_id, lease, metadata), session=True
        )
        return OpenedSession(session_id, remaining / 1000)

    def _keep_alive(self, session_id: str, lease_duration: float) -> Renewal:
        if not _SESSION_ID.match(session_id):
            raise SessionExpired(session_id)
        lease = _milliseconds(lease_duration)
        renewed = self._run(lambda ex: self.dialect.keep_alive(ex, session_id, lease), session=True)
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
        """Remove expired sessions, then reclaim the rows of idle names (see :meth:`reclaim_idle_leases`)."""
        expired = self._run(lambda ex: self.dialect.expired_sessions(ex, limit))
        purged = self._run(lambda ex: self.dialect.purge_sessions(ex, expired)).sessions if expired else 0
        reclaimed = self.reclaim_idle_leases(limit)
        if reclaimed:
            logger.info("reclaimed %d idle lease rows of database %r", reclaimed, self.alias)
        return purged

    def reclaim_idle_leases(self, limit: int = MAX_PURGE_LIMIT) -> int:
        """Delete the rows of names free for ``reclaim_idle`` seconds, ``limit`` per transaction and
        at most ``RECLAIM_BATCHES`` transactions; return how many went. A name made again starts
        above the reclaim floor, so its tokens never go back (``Dialect.reclaim_idle_leases``)."""
        idle, settle = _milliseconds(self.reclaim_idle), _milliseconds(self.floor_settles)
        if not self._run(lambda ex: self.dialect.has_idle_leases(ex, idle)):
            return 0
        total = 0
        for _ in range(RECLAIM_BATCHES):
            deleted = self._run(lambda ex: self.dialect.reclaim_idle_leases(ex, idle, settle, limit))
            total += deleted
            if deleted < limit:
                break
        return total

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


def _snapshot(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a database's settings that later changes to them (OPTIONS and TEST too) leave alone."""
    return {key: dict(value) if isinstance(value, dict) else value for key, value in settings.items()}


def _cause(error: BaseException) -> BaseException:
    """The driver's own error behind Django's wrapper of it."""
    if isinstance(error, DjangoDatabaseError) and error.__cause__ is not None:
        return error.__cause__
    return error
