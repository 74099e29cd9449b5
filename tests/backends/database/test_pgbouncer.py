"""PostgreSQL through PgBouncer in transaction mode (the TCK runs there too, in test_tck).

Behind transaction pooling a client's next transaction may run on another server
connection, and a server connection serves other clients in between: the
backend prepares nothing, sets nothing for its session, and listens over a
direct connection (or polls).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.conf import settings

from django_simba.backends.database import DatabaseBackend
from django_simba.backends.database.postgresql import PolledPostgresqlBackend, PostgresqlBackend
from django_simba.spi import BackendTimeout, ConfigurationError
from django_simba.testing import wait_until
from tests.servers.pgbouncer import Pgbouncer

from .conftest import Outsider, on

pytestmark = [
    pytest.mark.parametrize("alias", [pytest.param("postgresql", marks=on("postgresql"))], indirect=True)
]


@pytest.fixture
def bounced(
    make_backend: Callable[..., DatabaseBackend], through_pgbouncer: dict[str, Any]
) -> Callable[..., DatabaseBackend]:
    """Build a backend on the alias through PgBouncer (with LISTEN over a direct connection)."""
    return lambda **options: make_backend(**{**through_pgbouncer, **options})


def pgbouncer_clients(bouncer: Pgbouncer, count: int) -> Iterator[psycopg.Connection[Any]]:
    database = settings.DATABASES["postgresql"]
    for _ in range(count):
        yield psycopg.connect(
            host=bouncer.host,
            port=bouncer.port,
            user=database["USER"],
            dbname=database["NAME"],
            autocommit=True,
        )


def exercise(backend: DatabaseBackend) -> None:
    """Every kind of call the backend makes."""
    name = f"bounced.{uuid.uuid4().hex[:8]}"
    session = backend.open_session(30, "bounced").session_id
    grant = backend.acquire(session, name)
    assert grant is not None
    assert backend.keep_alive(session, 30).owned == {name: grant.token}
    backend.join(session, name)
    assert [m.session_id for m in backend.members(name)] == [session]
    backend.release(session, name, grant.token)
    assert backend.owner(name) is None
    backend.purge_expired()
    backend.close_session(session)


def test_the_calls_go_through_pgbouncer_and_the_listener_goes_direct(
    bounced: Callable[..., DatabaseBackend], pgbouncer: Pgbouncer, through_pgbouncer: dict[str, Any]
) -> None:
    backend = bounced()
    assert isinstance(backend, PostgresqlBackend)
    backend.subscribe(lambda event: None)
    exercise(backend)
    (link,) = backend._pool._idle
    assert link.raw.info.port == pgbouncer.port
    wait_until(lambda: backend.notifying, 5, message="the listener to connect")
    listener = backend._listener._link
    assert listener is not None and listener.raw.info.port == int(through_pgbouncer["listen"]["PORT"])


def test_nothing_the_backend_sets_stays_on_pgbouncers_server_connections(
    bounced: Callable[..., DatabaseBackend], pgbouncer: Pgbouncer
) -> None:
    backend = bounced(max_connections=5)
    for _ in range(3):
        exercise(backend)
    # Every server connection of the pool, each held by a client in a transaction of its own.
    clients = list(pgbouncer_clients(pgbouncer, 5))
    try:
        seen = set()
        for client in clients:
            client.execute("BEGIN")
            pid, statement_timeout, lock_timeout, prepared = client.execute(
                "SELECT pg_backend_pid(), current_setting('statement_timeout'),"
                " current_setting('lock_timeout'), (SELECT count(*) FROM pg_prepared_statements)"
            ).fetchone()  # type: ignore[misc]
            seen.add(pid)
            assert (statement_timeout, lock_timeout, prepared) == ("0", "0", 0)
        assert len(seen) == 5
    finally:
        for client in clients:
            client.close()


def test_a_locked_row_times_out_behind_pgbouncer(
    bounced: Callable[..., DatabaseBackend], outsider: Outsider
) -> None:
    """The timeouts hold behind the pooler (set for each transaction, not for the session)."""
    backend = bounced(timeout=1.0)
    session = backend.open_session(30, "locked").session_id
    outsider.begin()
    outsider.lock_session(session)
    started = time.monotonic()
    with pytest.raises(BackendTimeout):
        backend.keep_alive(session, 30)
    assert 0.8 < time.monotonic() - started < 2.0
    outsider.rollback()
    assert backend.keep_alive(session, 30).owned == {}
    backend.close_session(session)


def test_without_a_direct_connection_the_backend_polls(bounced: Callable[..., DatabaseBackend]) -> None:
    backend = bounced(listen=None)
    assert isinstance(backend, PolledPostgresqlBackend) and not backend.notifies
    exercise(backend)


def test_polled_releases_send_no_notify(
    bounced: Callable[..., DatabaseBackend], through_pgbouncer: dict[str, Any]
) -> None:
    """Nobody listens where the backend polls; a NOTIFY would make releases commit one at a time."""
    from django_simba.backends.database.postgresql import lease_channel

    polled, notifying = bounced(listen=None), bounced()
    name = f"bounced.{uuid.uuid4().hex[:8]}"
    direct = through_pgbouncer["listen"]
    database = settings.DATABASES["postgresql"]
    with psycopg.connect(
        host=direct["HOST"],
        port=direct["PORT"],
        user=database["USER"],
        dbname=database["NAME"],
        autocommit=True,
    ) as listener:
        listener.execute(f'LISTEN "{lease_channel(name)}"')
        for backend in (polled, notifying):
            session = backend.open_session(30, "releaser").session_id
            grant = backend.acquire(session, name)
            assert grant is not None
            backend.release(session, name, grant.token)
            backend.close_session(session)
        # Notifications arrive in commit order: all of the releases' come before this one.
        listener.execute(f"NOTIFY \"{lease_channel(name)}\", 'end'")
        payloads = []
        for notification in listener.notifies(timeout=5):
            if notification.payload == "end":
                break
            payloads.append(notification.payload)
        assert payloads == [f"released:{name}"]  # the notifying backend's release alone
    assert not polled.dialect.notify and notifying.dialect.notify  # type: ignore[attr-defined]


def test_listening_through_the_pooler_is_refused(alias: str, through_pgbouncer: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="LISTEN cannot work through a pooler"):
        PostgresqlBackend({**through_pgbouncer, "listen": None})
