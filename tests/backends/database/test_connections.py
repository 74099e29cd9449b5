"""The backend's own connections: pooled, replaced when they fail, bounded in time, fork-safe."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections

from django_simba.backends.database import AnyDatabaseBackend, DatabaseBackend
from django_simba.spi import BackendTimeout, BackendUnavailable, ConfigurationError, SessionExpired
from django_simba.testing import wait_until

from .conftest import Outsider, each_alias, on
from .proxy import FreezableProxy

servers = pytest.mark.parametrize(
    "alias",
    [pytest.param(alias, marks=on(alias), id=alias) for alias in ("postgresql", "mysql")],
    indirect=True,
)


def server_pid(backend: DatabaseBackend) -> Any:
    """The server-side id of the backend's (single) idle connection."""
    (link,) = backend._pool._idle
    return link.raw.info.backend_pid if backend.dialect.vendor == "postgresql" else link.raw.thread_id()


def point_at(backend: DatabaseBackend, host: str, port: int) -> None:
    """Make the backend connect to another address (its alias stays the test's)."""
    backend._settings = {**backend._settings, "HOST": host, "PORT": str(port)}


def test_bad_options_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match=r"not in settings\.DATABASES"):
        AnyDatabaseBackend.build({"alias": "nowhere"})
    with pytest.raises(ConfigurationError, match="unknown database backend options"):
        AnyDatabaseBackend.build({"alias": "sqlite", "url": "x"})
    with pytest.raises(ConfigurationError, match="max_idle_connections"):
        AnyDatabaseBackend.build({"alias": "sqlite", "max_idle_connections": -1})
    with pytest.raises(ConfigurationError, match="max_connections"):
        AnyDatabaseBackend.build({"alias": "sqlite", "max_connections": 0})
    with pytest.raises(ConfigurationError, match="cannot exceed max_connections"):
        AnyDatabaseBackend.build({"alias": "sqlite", "max_connections": 2, "max_idle_connections": 3})


@pytest.mark.mysql  # the alias (defined where its driver is installed)
def test_postgresql_options_on_another_database_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="are for PostgreSQL, not mysql"):
        AnyDatabaseBackend.build({"alias": "mysql", "transaction_pooling": True})


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_an_id_this_backend_never_issued_is_expired_without_io(backend: DatabaseBackend) -> None:
    for bad in ("", "x" * 33, "not-an-id", "é" * 8):
        with pytest.raises(SessionExpired):
            backend.keep_alive(bad, 30)
        with pytest.raises(SessionExpired):
            backend.acquire(bad, "a.name")
        backend.release(bad, "a.name")
        backend.close_session(bad)
    assert backend.traffic.round_trips == 0


@servers
def test_close_closes_every_connection(backend: DatabaseBackend, outsider: Outsider) -> None:
    baseline = outsider.server_connections()
    sid = backend.open_session(30, "threads").session_id
    barrier = threading.Barrier(6)

    def work(n: int) -> None:
        barrier.wait()
        for _ in range(5):
            backend.acquire(sid, f"pool.{n}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert 1 <= backend.connection_count() <= 2  # max_connections; the surplus closes after a grace
    wait_until(
        lambda: outsider.server_connections() == baseline + backend.connection_count(),
        5,
        message="the connections beyond the idle ones closed",
    )
    backend.close()
    assert backend.connection_count() == 0
    wait_until(lambda: outsider.server_connections() == baseline, 5, message="connections closed")
    # Usable again after close.
    assert backend.keep_alive(sid, 30).owned == {f"pool.{n}": 1 for n in range(6)}


@servers
def test_a_connection_killed_by_the_server_is_replaced(backend: DatabaseBackend, outsider: Outsider) -> None:
    sid = backend.open_session(30, "killed").session_id
    killed = server_pid(backend)
    if outsider.vendor == "postgresql":
        outsider.execute("SELECT pg_terminate_backend(%s)", (killed,))
    else:
        outsider.execute(f"KILL {int(killed)}")
    assert backend.keep_alive(sid, 30).owned == {}
    assert server_pid(backend) != killed
    backend.close_session(sid)


@servers
def test_a_server_that_stops_answering_times_out(
    alias: str, make_backend: Callable[..., DatabaseBackend]
) -> None:
    settings = connections[alias].settings_dict
    proxy = FreezableProxy(settings["HOST"], int(settings["PORT"]))
    try:
        backend = make_backend(timeout=1.0)
        point_at(backend, "127.0.0.1", proxy.port)
        sid = backend.open_session(30, "behind a proxy").session_id
        proxy.freeze()
        started = time.monotonic()
        with pytest.raises(BackendTimeout):
            backend.keep_alive(sid, 30)
        assert time.monotonic() - started < 2.0
        assert backend.connection_count() == 0  # the stuck connection is gone
    finally:
        proxy.close()


@servers
def test_an_unreachable_server_is_unavailable(make_backend: Callable[..., DatabaseBackend]) -> None:
    backend = make_backend(timeout=1.0)
    point_at(backend, "127.0.0.1", 1)
    started = time.monotonic()
    with pytest.raises(BackendUnavailable):
        backend.open_session(30, "nowhere")
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_a_forked_child_never_touches_the_parents_connections(
    backend: DatabaseBackend, outsider: Outsider
) -> None:
    name = f"fork.{uuid.uuid4().hex[:8]}"
    parent = backend.open_session(30, "parent").session_id
    (parents_link,) = backend._pool._idle
    parents_raw = parents_link.raw
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never return into pytest
        status = 1
        try:
            backend.after_fork()
            child = backend.open_session(30, "child").session_id
            grant = backend.acquire(child, name)
            backend.close_session(child)
            os.write(writing, f"{grant.token if grant else 0} {backend.connection_count()}".encode())
            backend.close()
            status = 0
        finally:
            os._exit(status)
    os.close(writing)
    _, status = os.waitpid(pid, 0)
    report = os.read(reading, 100).decode()
    os.close(reading)
    assert os.waitstatus_to_exitcode(status) == 0
    assert report == "1 1"
    # The parent's connection was neither closed nor used by the child: it still works.
    grant = backend.acquire(parent, name)
    assert grant is not None and grant.token == 2
    (link,) = backend._pool._idle
    assert link.raw is parents_raw
    backend.close_session(parent)


mariadb = pytest.mark.parametrize(
    "alias", [pytest.param("mysql", marks=on("mysql"), id="mariadb")], indirect=True
)


def prepared_executions(backend: DatabaseBackend) -> int:
    """How many prepared statements the backend's (single) idle connection has run (SQL EXECUTE)."""
    (link,) = backend._pool._idle
    cursor = link.raw.cursor()
    try:
        cursor.execute("SHOW SESSION STATUS LIKE 'Com_execute_sql'")
        return int(cursor.fetchone()[1])
    finally:
        cursor.close()


@mariadb
def test_mariadb_runs_the_lock_cycle_prepared(backend: DatabaseBackend) -> None:
    sid = backend.open_session(30, "prepared").session_id
    assert backend.dialect.prepared  # type: ignore[attr-defined]
    before = prepared_executions(backend)
    grant = backend.acquire(sid, "prepared.cycle")
    assert grant is not None
    backend.release(sid, "prepared.cycle", grant.token)
    assert prepared_executions(backend) - before == 2
    backend.close_session(sid)


@mariadb
def test_a_connection_that_lost_its_prepared_statements_is_replaced(backend: DatabaseBackend) -> None:
    sid = backend.open_session(30, "unprepared").session_id
    old = server_pid(backend)
    (link,) = backend._pool._idle
    cursor = link.raw.cursor()
    cursor.execute("DEALLOCATE PREPARE simba_take_free")
    cursor.close()
    grant = backend.acquire(sid, "unprepared.name")
    assert grant is not None and grant.token >= 1
    assert server_pid(backend) != old
    assert backend.owner("unprepared.name") is not None
    backend.close_session(sid)


@pytest.mark.parametrize(
    "alias", [pytest.param(name, marks=on(name), id=name) for name in ("postgresql", "mysql")], indirect=True
)
def test_a_call_a_deadlock_rolled_back_is_sent_again(backend: DatabaseBackend, alias: str) -> None:
    """The server picked the call's transaction as a deadlock's victim: nothing of it was applied."""
    if alias == "mysql":
        import MySQLdb

        victim: BaseException = MySQLdb.OperationalError(1213, "Deadlock found when trying to get lock")
    else:
        import psycopg

        victim = psycopg.errors.DeadlockDetected("deadlock detected")
    tries: list[int] = []

    def operation(executor: Any) -> str:
        tries.append(1)
        if len(tries) < 3:
            raise victim
        return "done"

    assert backend._run(operation) == "done" and len(tries) == 3
    tries.clear()

    def always(executor: Any) -> str:
        tries.append(1)
        raise victim

    with pytest.raises(BackendUnavailable, match=r"[Dd]eadlock"):
        backend._run(always)
    assert len(tries) == 3  # the first try and two more
