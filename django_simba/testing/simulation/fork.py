"""A fork without hooks: the child starts with a copy of its parent's memory.

uWSGI forks its workers from C, so Python's fork hooks never run: the child's engine
still has the parent's session, terms and waiting contenders, and its threads are
gone. The simulation makes that copy with :func:`copy.deepcopy` of the parent's
workload (which reaches its engine, elections, locks and their terms), with the
world, and the parent's process, runtime and backend connection mapped to the
child's own: nothing of the engine is named or rebuilt, so the child runs exactly
the code the parent ran, on a copy of its state, and only the engine's public API
and ``runtime.pid()`` can tell it that it is a child.

A copied lock is in the state its original was in, as after a real fork. The thread that
forks is the child's one thread, the same object (a handle's holdings are keyed by it); any
other thread, and the parent's asyncio tasks and futures, did not survive the fork: each is
copied as a placeholder that nothing runs.
"""

from __future__ import annotations

import asyncio
import copy
import copyreg
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

_LOCK = type(threading.Lock())
_RLOCK = type(threading.RLock())


def _new_lock(locked: bool) -> Any:
    lock = threading.Lock()
    if locked:
        lock.acquire()
    return lock


def _reduce_lock(lock: Any) -> tuple[Any, tuple[bool]]:
    return _new_lock, (lock.locked(),)


def _reduce_rlock(lock: Any) -> tuple[Any, tuple[()]]:
    # Between two events of the single-threaded world no re-entrant lock is held.
    return threading.RLock, ()


def _reduce_condition(condition: threading.Condition) -> tuple[Any, tuple[Any]]:
    return threading.Condition, (condition._lock,)  # type: ignore[attr-defined]


@contextmanager
def _copyable_threading() -> Iterator[None]:
    """Let deepcopy copy locks and conditions (it refuses to by default), for the copy only."""
    reducers: dict[Any, Any] = {
        _LOCK: _reduce_lock,
        _RLOCK: _reduce_rlock,
        threading.Condition: _reduce_condition,
        threading.Thread: lambda thread: (_gone, ("thread",)),
        threading._MainThread: lambda thread: (_gone, ("thread",)),  # type: ignore[attr-defined]
        threading._DummyThread: lambda thread: (_gone, ("thread",)),
        asyncio.Task: lambda task: (_gone, ("task",)),
        asyncio.Future: lambda future: (_gone, ("future",)),
    }
    saved = {kind: copyreg.dispatch_table.get(kind) for kind in reducers}
    copyreg.dispatch_table.update(reducers)
    try:
        yield
    finally:
        for kind, reducer in saved.items():
            if reducer is None:
                copyreg.dispatch_table.pop(kind, None)
            else:
                copyreg.dispatch_table[kind] = reducer


def copy_of_memory(root: T, replaced: Mapping[Any, Any]) -> T:
    """A deep copy of ``root``, in which each key of ``replaced`` is its value instead of a copy."""
    memo: dict[int, Any] = {id(original): replacement for original, replacement in replaced.items()}
    forking = threading.current_thread()
    memo[id(forking)] = forking
    with _copyable_threading():
        return copy.deepcopy(root, memo)


class Gone:
    """What a forked child has of a thread, task or future of its parent: nothing that runs."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"<the parent's {self.kind}, gone in the child>"


def _gone(kind: str) -> Any:
    return Gone(kind)
