"""Process-level behaviour: no Django, no threads at import, fork safety, exit."""

from __future__ import annotations

import ctypes
import os
import select
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import EndReason, Engine, EngineConfig, ThreadRuntime
from django_simba.spi import BackendUnavailable, OpenedSession


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_engine_spi_and_backends_import_nothing_from_django():
    out = run_python(
        """
        import sys
        import django_simba, django_simba.engine, django_simba.spi, django_simba.backends.memory
        print(sorted(m for m in sys.modules if m == "django" or m.startswith("django.")))
        """
    )
    assert out == "[]"


def test_no_thread_is_started_at_import():
    out = run_python(
        """
        import threading
        import django_simba, django_simba.engine, django_simba.backends.memory
        from django_simba.engine import Engine, EngineConfig
        from django_simba.backends.memory import MemoryBackend
        Engine(MemoryBackend(), EngineConfig())
        print(threading.active_count())
        """
    )
    assert out == "1"


def test_a_forked_child_never_reuses_the_parent_session(threaded_engine: Engine):
    lock = threaded_engine.lock("forked")
    term = lock.acquire(5)
    parent_session = threaded_engine.session_id
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            ended = term.ended
            child_session = threaded_engine.wait_for_session(5)
            message = f"{ended.value if ended else None}|{child_session}|{term.is_valid()}"
            os.write(write, message.encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    message = os.read(read, 1000).decode()
    os.close(read)
    assert os.WEXITSTATUS(status) == 0
    ended, child_session, valid = message.split("|")
    assert ended == EndReason.FORKED.value and valid == "False"
    assert child_session not in ("", "None", parent_session)
    assert term.is_valid() and threaded_engine.session_id == parent_session  # the parent is untouched
    lock.release()


def test_the_session_is_closed_at_interpreter_exit(tmp_path):
    out = run_python(
        """
        from django_simba.engine import Engine, EngineConfig
        from django_simba.backends.memory import MemoryBackend
        import django_simba.engine.process as core
        backend = MemoryBackend()
        engine = Engine(backend, EngineConfig(lease_duration=30, renew_interval=5))
        engine.lock("exit").acquire(5)
        core.close_engines_at_exit()  # what atexit runs
        print(backend.owner("exit"), [s.session_id for s in backend.sessions()])
        """
    )
    assert out == "None []"


def test_elections_contend_again_in_a_forked_child(threaded_engine: Engine):
    election = threaded_engine.election("forked-leader")
    assert election.wait_decided(5) and election.is_leader
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its copy of the memory backend still has the parent's live session
        try:
            from django_simba.testing import wait_until

            wait_until(lambda: election._decided.is_set(), 5)
            os.write(write, f"{election.is_leader}|{threaded_engine.session_id}".encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    leader, child_session = os.read(read, 1000).decode().split("|")
    os.close(read)
    assert leader == "False"  # refused: the parent's session still leads
    assert child_session != threaded_engine.session_id
    assert election.is_leader


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


def test_a_child_forked_without_hooks_starts_a_session_of_its_own():
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
    assert inherited_valid == "False"
    assert child_session not in ("", "None", parent_session) and shared == "None"
    assert ended == EndReason.FORKED.value
    assert term.is_valid() and engine.session_id == parent_session  # the parent is untouched


def test_a_child_forked_without_hooks_before_the_session_opened_can_lock():
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

    assert run_in_hookless_child(child) == "1"
