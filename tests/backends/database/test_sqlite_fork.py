"""A fork while another thread of the process is inside an SQLite call of the backend.

SQLite keeps the locks a process holds on a file in the library's memory, which a child
inherits: forked in the middle of a write transaction, the child's library believes one of
its own connections holds the file's lock, and every call of the child finds the database
locked for good. The backend lets no fork happen in the middle of one of its calls.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable

import pytest

from django_simba.backends.database import DatabaseBackend

from .conftest import on

pytestmark = on("sqlite")

#: How long the parent's write transaction lasts once the fork was asked for.
WRITING = 0.5


@pytest.mark.parametrize("alias", ["sqlite"])
def test_a_child_forked_while_a_call_writes_can_write_too(
    make_backend: Callable[..., DatabaseBackend],
) -> None:
    backend = make_backend(timeout=5.0)
    backend.open_session(10.0, "warm")  # the tables exist and the pool has a connection
    inside = threading.Event()

    def slow_write(executor: object) -> None:
        raw = executor.raw  # type: ignore[attr-defined]
        raw.execute("BEGIN IMMEDIATE")  # the file's write lock
        raw.execute("UPDATE simba_session SET metadata = metadata")
        inside.set()
        time.sleep(WRITING)  # a slow statement, for the fork to meet
        raw.execute("COMMIT")

    writer = threading.Thread(target=lambda: backend._run(slow_write))
    writer.start()
    assert inside.wait(5.0)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: opens a session of its own, and says how it went
        os.close(read)
        try:
            backend.after_fork()
            session = backend.open_session(10.0, "child")
            os.write(write, f"ok {session.session_id}".encode())
        except BaseException as error:
            os.write(write, f"error {error!r}".encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], 15.0)
        assert ready, "the child did not answer within 15 s"
        answer = os.read(read, 4096).decode()
    finally:
        os.close(read)
        os.waitpid(pid, 0)
        writer.join(10.0)
    assert answer.startswith("ok "), answer
