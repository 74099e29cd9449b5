"""What an SQLite connection's transaction holds, asked of SQLite itself.

Python's sqlite3 module says whether a connection is in a transaction
(``in_transaction``), not whether the transaction has read or written: the
deferred ``BEGIN`` of Django's ``atomic()`` holds no lock until its first
statement. SQLite knows: ``sqlite3_txn_state`` (3.34+) answers NONE, READ or
WRITE for a connection's database. This module calls it through ctypes, on the
handle that Python's connection object wraps (the first field after the object
header, in every CPython since the module exists), in the library the sqlite3
module runs on, and only when that library's version is the one the module
reports (a copy of another version may lay its structures out otherwise).
Elsewhere (another Python, a library that hides the function) it answers None:
SQLite cannot be asked.
"""

from __future__ import annotations

import ctypes
import enum
import functools
import platform
import sqlite3
from collections.abc import Callable
from typing import Any


class TransactionState(enum.IntEnum):
    """``SQLITE_TXN_*``: what a connection's transaction holds on a database."""

    NONE = 0  # no transaction, or a deferred one that has touched nothing yet
    READ = 1  # it read: a SHARED lock in the rollback journal modes, a snapshot in WAL
    WRITE = 2  # it wrote (or began IMMEDIATE): the database's one write lock


def transaction_state(connection: sqlite3.Connection) -> TransactionState | None:
    """What ``connection``'s transaction holds on its main database; None if SQLite cannot say."""
    if not connection.in_transaction:
        return TransactionState.NONE
    ask = _txn_state()
    if ask is None:
        return None
    handle = ctypes.c_void_p.from_address(id(connection) + object.__basicsize__).value
    if not handle:
        return None  # a closed connection
    return TransactionState(ask(handle, b"main"))


@functools.cache
def _txn_state() -> Callable[[Any, bytes], int] | None:
    """``sqlite3_txn_state`` of the library the sqlite3 module runs on, if it can be reached."""
    if platform.python_implementation() != "CPython":
        return None  # no object header to step over: id() is no address
    for library in _libraries():
        try:
            function = library.sqlite3_txn_state
            version = library.sqlite3_libversion_number
        except AttributeError:
            continue
        version.restype = ctypes.c_int
        major, minor, patch = sqlite3.sqlite_version_info
        if version() != major * 1_000_000 + minor * 1000 + patch:
            continue
        function.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        function.restype = ctypes.c_int
        return function
    return None


def _libraries() -> list[ctypes.CDLL]:
    """The sqlite3 module's extension (its symbols and its libraries'), then the program itself."""
    found = []
    import _sqlite3

    for path in (getattr(_sqlite3, "__file__", None), None):
        try:
            found.append(ctypes.CDLL(path))
        except OSError:
            continue
    return found
