"""Scenarios of a child forked without Python's fork hooks, each run in a fresh interpreter.

``tests/engine/test_process.py`` runs each function here with ``python -c`` and reads what it
printed: forking from C is only sound in a process with no other thread, which a test run
(its fixtures, its servers' clients) cannot promise.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import threading
from collections.abc import Callable

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import Engine, EngineConfig, ThreadRuntime
from django_simba.spi import BackendUnavailable, OpenedSession


def quiesce(engine: Engine) -> None:
    """Stop the engine's threads, keeping its session and terms, as a pre-forking master would.

    In a child forked from C, CPython's own after-fork repair does not run either: a parent's
    thread that was running at the fork can leave the child's interpreter stuck in a way no
    Python code can mend (so the library holds no thread in such a master). The child still
    inherits what matters here: the parent's session and terms.
    """
    engine.runtime.stop(5)
    assert threading.active_count() == 1, threading.enumerate()


def make_engine() -> Engine:
    return Engine(
        MemoryBackend(timeout=5.0), EngineConfig(lease_duration=120.0, renew_interval=60.0), ThreadRuntime()
    )


def fork_without_hooks() -> int:
    """Fork from C, as uWSGI's default prefork does: no ``os.register_at_fork`` hook runs.

    ``PyDLL`` keeps the GIL across the call, so the child resumes in this thread only.
    """
    return ctypes.PyDLL(None).fork()


def run_in_hookless_child(child: Callable[[], str]) -> str:
    """Run ``child`` in a child forked without hooks; return what it returned (or its error)."""
    read, write = os.pipe()
    pid = fork_without_hooks()
    if pid == 0:
        try:
            try:
                message = child()
            except BaseException as error:  # report it to the parent, whatever it was
                message = f"error: {error!r}"
            os.write(write, message.encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], 30)
        assert ready, "the child did not answer within 30 s"
        return os.read(read, 10_000).decode()
    finally:
        os.close(read)
        os.waitpid(pid, 0)


def own_session() -> str:
    """The parent holds a name; the child, before and after its first use of the engine."""
    engine = make_engine()
    lock = engine.lock("hookless")
    term = lock.acquire(5)
    parent_session = engine.session_id
    quiesce(engine)

    def child() -> str:
        inherited_valid = term.is_valid()  # before the engine is used: the term is the parent's
        session = engine.wait_for_session(5)
        # The child's copy of the backend still has the parent's session holding the name:
        # on that session, it would get the parent's very term back.
        shared = engine.lock("hookless").try_acquire()
        return f"{inherited_valid}|{session}|{term.ended.value if term.ended else None}|{shared}"

    inherited_valid, child_session, ended, shared = run_in_hookless_child(child).split("|")
    return json.dumps(
        {
            "inherited_valid": inherited_valid,
            "child_session": child_session,
            "parent_session": parent_session,
            "ended": ended,
            "shared": shared,
            "parent_untouched": term.is_valid() and engine.session_id == parent_session,
        }
    )


def before_the_session_opened() -> str:
    """The parent's session never opened before the fork; the child locks a name."""
    engine = make_engine()
    parent = os.getpid()
    backend = engine.backend
    real_open = backend.open_session
    tried = threading.Event()

    def open_session(lease_duration: float, metadata: str = "") -> OpenedSession:
        if os.getpid() == parent:
            tried.set()
            raise BackendUnavailable("not yet")  # the parent's session never opened before the fork
        return real_open(lease_duration, metadata)

    backend.open_session = open_session  # type: ignore[method-assign]
    engine.start()
    assert tried.wait(5)
    quiesce(engine)

    def child() -> str:
        return str(engine.lock("early").acquire(5).token)

    return run_in_hookless_child(child)
