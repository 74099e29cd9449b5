"""Process-level behaviour: no Django, no threads at import, fork safety, exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from django_simba.engine import EndReason, Engine

from .forking import run_in_child


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

    def in_the_child() -> str:
        ended = term.ended
        child_session = threaded_engine.wait_for_session(5)
        return f"{ended.value if ended else None}|{child_session}|{term.is_valid()}"

    ended, child_session, valid = run_in_child(in_the_child).split("|")
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


def test_a_child_forked_without_hooks_starts_a_session_of_its_own():
    seen = json.loads(run_python("from tests.engine.hookless import own_session; print(own_session())"))
    assert seen["inherited_valid"] == "False"  # the parent's term, checked before any engine use
    assert seen["child_session"] not in ("", "None", seen["parent_session"])
    assert seen["shared"] == "None"  # refused: on the parent's session it would get the parent's term
    assert seen["ended"] == EndReason.FORKED.value
    assert seen["parent_untouched"]


def test_a_child_forked_without_hooks_before_the_session_opened_can_lock():
    code = "from tests.engine.hookless import before_the_session_opened; print(before_the_session_opened())"
    assert run_python(code) == "1"
