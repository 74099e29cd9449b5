"""The SQLite flavour of the database backend: one writer at a time, so calls take turns."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, router
from django.db.utils import load_backend

from ...routers import SimbaRouter
from ...spi import DEFAULT_TIMEOUT, BackendTimeout, ConfigurationError
from .backend import DatabaseBackend
from .dialects.base import Executor

T = TypeVar("T")


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
