"""Client round trips, counted by wrapping each driver's send path in this process.

One count is one request the client sends and waits for: a redis-py command or
pipeline, a psycopg (or psycopg2) ``execute``, a mysqlclient ``query`` (several
statements sent as one query count once), a pymysql command, a kazoo request (a
multi-op transaction counts once). New connections are counted apart
(``connects``): each costs several round trips of handshake. SQLite has no round
trips and is not counted. The wrappers are only in place inside
:func:`counting`, so timed runs pay nothing for them.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

_lock = threading.Lock()


def _bump(counts: Counter[str], key: str) -> None:
    with _lock:
        counts[key] += 1


@contextlib.contextmanager
def counting() -> Iterator[Counter[str]]:
    """Count round trips (``rt``) and new connections (``connects``) of every driver installed."""
    counts: Counter[str] = Counter()
    undo: list[Callable[[], None]] = []

    def wrap(owner: Any, attribute: str, key: str) -> None:
        original = owner.__dict__[attribute]
        if isinstance(original, classmethod):
            function = original.__func__

            def counted_class(cls: Any, *args: Any, **kwargs: Any) -> Any:
                _bump(counts, key)
                return function(cls, *args, **kwargs)

            setattr(owner, attribute, classmethod(counted_class))
        else:

            def counted(*args: Any, **kwargs: Any) -> Any:
                _bump(counts, key)
                return original(*args, **kwargs)

            setattr(owner, attribute, counted)
        undo.append(lambda: setattr(owner, attribute, original))

    with contextlib.suppress(ImportError):
        from redis.connection import AbstractConnection, Connection

        wrap(AbstractConnection, "send_packed_command", "rt")
        wrap(Connection, "_connect", "connects")  # the socket itself; connect() is called per command
    with contextlib.suppress(ImportError):
        import psycopg

        wrap(psycopg.Cursor, "execute", "rt")
        wrap(psycopg.Cursor, "executemany", "rt")
        wrap(psycopg.Connection, "connect", "connects")
    with contextlib.suppress(ImportError):
        import MySQLdb.connections

        # Where every query leaves, whether through a cursor or the connection's own calls.
        wrap(MySQLdb.connections.Connection, "query", "rt")
        wrap(MySQLdb.connections.Connection, "__init__", "connects")
    with contextlib.suppress(ImportError):
        import pymysql.connections  # type: ignore[import-untyped]

        wrap(pymysql.connections.Connection, "_execute_command", "rt")
        wrap(pymysql.connections.Connection, "connect", "connects")
    with contextlib.suppress(ImportError):
        from kazoo.client import KazooClient

        wrap(KazooClient, "_call", "rt")
    with contextlib.suppress(ImportError):
        import psycopg2  # type: ignore[import-untyped]
        import psycopg2.extensions  # type: ignore[import-untyped]

        class CountingCursor(psycopg2.extensions.cursor):  # type: ignore[misc]
            def execute(self, query: Any, vars: Any = None) -> Any:
                _bump(counts, "rt")
                return super().execute(query, vars)

        connect = psycopg2.connect

        def counted_connect(*args: Any, **kwargs: Any) -> Any:
            _bump(counts, "connects")
            kwargs.setdefault("cursor_factory", CountingCursor)
            return connect(*args, **kwargs)

        psycopg2.connect = counted_connect
        undo.append(lambda: setattr(psycopg2, "connect", connect))
    try:
        yield counts
    finally:
        for restore in reversed(undo):
            restore()
