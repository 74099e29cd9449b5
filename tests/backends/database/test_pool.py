"""The pool's bounds: ``max_connections`` open at most, ``max_idle_connections`` kept between calls."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from django_simba.backends.database import DatabaseBackend
from django_simba.engine import Engine, EngineConfig, ThreadRuntime
from django_simba.spi import BackendTimeout, LockTimeout
from django_simba.testing import wait_until

from .calls import Call
from .conftest import Outsider, on

servers = pytest.mark.parametrize(
    "alias",
    [pytest.param(alias, marks=on(alias), id=alias) for alias in ("postgresql", "mysql")],
    indirect=True,
)


@servers
@pytest.mark.parametrize("limit", [1, 3])
def test_eight_threads_never_open_more_than_max_connections(
    make_backend: Callable[..., DatabaseBackend], outsider: Outsider, limit: int
) -> None:
    backend = make_backend(max_connections=limit)
    baseline = outsider.server_connections()
    session = backend.open_session(30, "pool").session_id
    assert backend.connection_count() == 1  # at rest: one idle connection
    start, stop = threading.Barrier(9), threading.Event()
    errors: list[BaseException] = []

    def cycle(n: int) -> None:
        start.wait()
        try:
            while not stop.is_set():
                grant = backend.acquire(session, f"pool.{n}")
                assert grant is not None
                backend.release(session, f"pool.{n}", grant.token)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=cycle, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    start.wait()
    peak_here = peak_server = 0
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        peak_here = max(peak_here, backend.connection_count())
        peak_server = max(peak_server, outsider.server_connections() - baseline)
    stop.set()
    for thread in threads:
        thread.join(10)
    assert errors == []
    assert peak_here == limit  # all of them used, never one more
    assert peak_server <= limit
    # The surplus stays for a grace (a burst reuses it), then the next call closes it.
    assert backend.connection_count() <= limit
    backend._pool.surplus_grace = 0
    backend.owner("pool.0")
    assert backend.connection_count() == 1
    backend.close_session(session)


@servers
def test_occasional_overlaps_reuse_the_connection_they_opened(
    make_backend: Callable[..., DatabaseBackend],
) -> None:
    """One thread cycles a lock without pause, another calls now and then: with one idle
    connection kept, the second connection must not be opened again at every overlap."""
    backend = make_backend()
    session = backend.open_session(30, "overlaps").session_id
    opened: list[object] = []
    connect = backend._pool._connect

    def counting_connect() -> Any:
        opened.append(None)
        return connect()

    backend._pool._connect = counting_connect
    progress = threading.Condition()
    cycles = [0]

    def cycle(name: str) -> None:
        grant = backend.acquire(session, name)
        assert grant is not None
        backend.release(session, name, grant.token)

    def busy() -> None:
        for _ in range(200):
            cycle("overlap.busy")
            with progress:
                cycles[0] += 1
                progress.notify_all()

    thread = threading.Thread(target=busy)
    thread.start()
    for n in range(1, 21):  # a call after every 8 cycles of the busy thread
        with progress:
            assert progress.wait_for(lambda n=n: cycles[0] >= 8 * n, 30)
        cycle("overlap.now-and-then")
    thread.join(30)
    assert len(opened) <= 1  # the second connection, once
    backend.close_session(session)


@servers
def test_a_call_waits_for_a_busy_connection_within_its_timeout(
    make_backend: Callable[..., DatabaseBackend],
) -> None:
    backend = make_backend(timeout=1.0, max_connections=1)
    session = backend.open_session(30, "busy").session_id
    name = f"pool.{uuid.uuid4().hex[:8]}"

    # Another call has the only connection for longer than a call may wait...
    busy = backend._pool.take(1.0)
    started = time.monotonic()
    with pytest.raises(BackendTimeout, match="max_connections"):
        backend.owner(name)
    assert 0.9 < time.monotonic() - started < 2.0
    # ...and a call waiting when it comes back gets it.
    waiting = Call(lambda: backend.acquire(session, name))
    wait_until(lambda: backend._pool.waiting() == 1, 5, message="the call to wait for the connection")
    backend._pool.give_back(busy)
    grant = waiting.result()
    assert grant is not None and grant.token == 1
    assert backend.connection_count() == 1
    backend.close_session(session)


@servers
def test_a_keep_alive_never_waits_for_the_callers_connections(
    make_backend: Callable[..., DatabaseBackend],
) -> None:
    """Every connection of the callers busy (a slow call each), the session's calls still go:
    they have one of their own beyond ``max_connections``, never one a caller holds."""
    backend = make_backend(timeout=1.0, max_connections=2)
    session = backend.open_session(30, "reserved").session_id
    held = [backend._pool.take(1.0), backend._pool.take(1.0)]
    with pytest.raises(BackendTimeout, match="max_connections"):
        backend.owner("pool.reserved")  # a caller's call finds them all busy...
    renewal = backend.keep_alive(session, 30)  # ...the keep-alive does not (it would time out)
    assert renewal.remaining > 0
    other = backend.open_session(30, "reserved too").session_id
    assert backend.connection_count() == 3  # max_connections, and the session's own
    for link in held:
        backend._pool.give_back(link)
    # Given back, the session's connection serves the callers too: it is idle like the others.
    assert backend.acquire(other, "pool.reserved") is not None
    backend.close_session(session)
    backend.close_session(other)


@servers
def test_a_caller_waits_for_a_connection_only_as_long_as_its_lock_timeout(
    make_backend: Callable[..., DatabaseBackend],
) -> None:
    """A saturated pool makes the lock time out at its own timeout, saying why, not at the backend's."""
    backend = make_backend(timeout=30.0, max_connections=1)
    engine = Engine(backend, EngineConfig(lease_duration=30, renew_interval=10), ThreadRuntime())
    try:
        engine.wait_for_session(10)
        busy = backend._pool.take(1.0)
        try:
            # The pool's own wait was the lock's half second (less what had passed), not 30 s.
            with pytest.raises(
                LockTimeout, match=r"within 500 ms .*max_connections\) stayed busy for the \d+ ms"
            ):
                engine.lock(f"pool.{uuid.uuid4().hex[:8]}").acquire(0.5)
        finally:
            backend._pool.give_back(busy)
    finally:
        engine.close()
