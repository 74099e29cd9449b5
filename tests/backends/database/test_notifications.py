"""PostgreSQL LISTEN/NOTIFY: releases and group changes reach waiting candidates at once."""

from __future__ import annotations

import uuid

import pytest

from django_simba.backends.database import DatabaseBackend
from django_simba.spi import Notification, NotificationKind
from django_simba.testing import wait_until

from .conftest import Outsider, each_alias, on

RELEASED, GROUP_CHANGED, RESYNC = (
    NotificationKind.RELEASED,
    NotificationKind.GROUP_CHANGED,
    NotificationKind.RESYNC,
)
postgresql_only = pytest.mark.parametrize(
    "alias", [pytest.param("postgresql", marks=on("postgresql"))], indirect=True
)


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_only_postgresql_notifies(alias: str, backend: DatabaseBackend) -> None:
    assert backend.notifies is (alias == "postgresql")
    assert type(backend).notifies is backend.notifies
    assert backend.vendor == alias
    assert not backend.notifying


@pytest.fixture
def heard(backend: DatabaseBackend) -> list[tuple[NotificationKind, str]]:
    events: list[tuple[NotificationKind, str]] = []

    def listen(event: Notification) -> None:
        events.append((event.kind, event.name))

    backend.subscribe(listen)
    wait_until(lambda: backend.notifying, 10, message="the listener to connect")
    return events


@postgresql_only
def test_every_way_of_freeing_a_lease_notifies(
    backend: DatabaseBackend, heard: list[tuple[NotificationKind, str]]
) -> None:
    base = f"notify.{uuid.uuid4().hex[:8]}"
    released, closed, forced, group, unwatched = (f"{base}.{n}" for n in range(5))
    for name in (released, closed, forced):
        backend.watch_lease(name)
    backend.watch_group(group)
    sid = backend.open_session(30, "notifier").session_id
    for name in (released, closed, forced, unwatched):
        assert backend.acquire(sid, name) is not None

    backend.release(sid, unwatched)  # first, so it would have arrived before the others
    backend.release(sid, released)
    wait_until(lambda: (RELEASED, released) in heard, 5, message="release notified")
    backend.force_release(forced)
    wait_until(lambda: (RELEASED, forced) in heard, 5, message="forced release notified")
    backend.join(sid, group)
    wait_until(lambda: (GROUP_CHANGED, group) in heard, 5, message="join notified")
    heard.clear()
    backend.close_session(sid)
    wait_until(
        lambda: {(RELEASED, closed), (GROUP_CHANGED, group)} <= set(heard), 5, message="close notified"
    )
    assert all(name != unwatched for _, name in heard)


@postgresql_only
def test_a_reconnected_listener_asks_for_a_resync(
    backend: DatabaseBackend, heard: list[tuple[NotificationKind, str]], outsider: Outsider
) -> None:
    name = f"notify.{uuid.uuid4().hex[:8]}"
    backend.watch_lease(name)
    listening_pid = backend._listener._link.raw.info.backend_pid
    outsider.execute("SELECT pg_terminate_backend(%s)", (listening_pid,))
    wait_until(lambda: (RESYNC, "") in heard, 10, message="RESYNC after the reconnect")
    wait_until(lambda: backend.notifying, 10, message="the listener to reconnect")

    sid = backend.open_session(30, "after reconnect").session_id
    assert backend.acquire(sid, name) is not None
    backend.release(sid, name)
    wait_until(lambda: (RELEASED, name) in heard, 5, message="release notified after the reconnect")
    backend.close_session(sid)


@postgresql_only
def test_close_stops_listening(backend: DatabaseBackend, heard: list[tuple[NotificationKind, str]]) -> None:
    backend.close()
    assert not backend.notifying
    assert backend._listener._thread is None


@postgresql_only
def test_the_process_hears_only_the_channels_it_watches(backend: DatabaseBackend) -> None:
    payloads: list[str] = []
    deliver = backend._listener._deliver
    backend._listener._deliver = lambda payload: (payloads.append(payload), deliver(payload))[1]
    heard: list[tuple[NotificationKind, str]] = []
    backend.subscribe(lambda event: heard.append((event.kind, event.name)))
    wait_until(lambda: backend.notifying, 10, message="the listener to connect")
    base = f"notify.{uuid.uuid4().hex[:8]}"
    watched, unwatched, dropped = f"{base}.watched", f"{base}.unwatched", f"{base}.dropped"
    backend.watch_lease(watched)
    backend.watch_lease(dropped)
    backend.unwatch_lease(dropped)
    sid = backend.open_session(30, "channels").session_id
    for name in (unwatched, dropped, unwatched, dropped, watched):
        assert backend.acquire(sid, name) is not None
        backend.release(sid, name)
    wait_until(lambda: (RELEASED, watched) in heard, 5, message="the watched release")
    # The watched release came last: the others were sent before it, on channels not listened on.
    assert payloads == [f"released:{watched}"]
    backend.close_session(sid)
