"""Time is the database's: UTC epoch milliseconds, whatever the host's clock or the session's zone."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db.backends.signals import connection_created

from django_simba.backends.database import DatabaseBackend
from django_simba.testing import wait_until

from .conftest import Outsider, each_alias

HOUR = 3600.0
# Far from UTC (MariaDB takes offsets up to +13:00 without its zone tables).
FAR_ZONES = {"postgresql": "Pacific/Kiritimati", "mysql": "+13:00"}


@pytest.fixture
def host_clock_an_hour_ahead(monkeypatch: pytest.MonkeyPatch) -> Callable[[], float]:
    """Skew this process's wall clock by an hour; return the true clock."""
    true_time = time.time
    true_time_ns = time.time_ns
    monkeypatch.setattr(time, "time", lambda: true_time() + HOUR)
    monkeypatch.setattr(time, "time_ns", lambda: true_time_ns() + int(HOUR * 1e9))
    return true_time


@pytest.fixture
def far_session_zone(alias: str) -> Iterator[list[str]]:
    """Every new connection of the alias gets a session time zone far from UTC."""
    applied: list[str] = []

    def set_zone(sender: Any, connection: Any, **kwargs: Any) -> None:
        if connection.alias != alias or connection.vendor not in FAR_ZONES:
            return
        with connection.connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(f"SET TIME ZONE '{FAR_ZONES['postgresql']}'")
            else:
                cursor.execute(f"SET time_zone = '{FAR_ZONES['mysql']}'")
        applied.append(connection.vendor)

    connection_created.connect(set_zone)
    yield applied
    connection_created.disconnect(set_zone)


def session_zone(backend: DatabaseBackend) -> str:
    sql = {"postgresql": "SHOW TIME ZONE", "mysql": "SELECT @@session.time_zone"}[backend.dialect.vendor]
    return str(backend._run(lambda ex: ex.run(sql, {})).rows[0][0])


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_a_host_clock_an_hour_off_changes_nothing(
    alias: str,
    make_backend: Callable[..., DatabaseBackend],
    outsider: Outsider,
    host_clock_an_hour_ahead: Callable[[], float],
    far_session_zone: list[str],
) -> None:
    backend = make_backend()
    name = f"clock.{uuid.uuid4().hex[:8]}"
    lease = 20.0
    before_ms = host_clock_an_hour_ahead() * 1000
    opened = backend.open_session(lease, "skewed host")
    after_ms = host_clock_an_hour_ahead() * 1000
    if alias in FAR_ZONES:
        assert far_session_zone, "the session time zone was not applied"
        # MySQL's connections then set UTC of their own (SYSDATE reads the session's zone).
        assert session_zone(backend) == ("+00:00" if alias == "mysql" else FAR_ZONES[alias])

    # Stored in UTC epoch ms by the database's clock: neither an hour nor a zone off.
    (expires_at,) = outsider.execute(
        "SELECT expires_at FROM simba_session WHERE session_id = %s", (opened.session_id,)
    )[0]
    assert before_ms + lease * 1000 - 1000 <= expires_at <= after_ms + lease * 1000 + 1000

    grant = backend.acquire(opened.session_id, name)
    assert grant is not None and lease - 1 < grant.remaining <= lease
    info = backend.owner(name)
    assert info is not None and lease - 1 < info.remaining <= lease
    renewal = backend.keep_alive(opened.session_id, lease)
    assert lease - 1 < renewal.remaining <= lease and renewal.owned == {name: grant.token}
    backend.close_session(opened.session_id)


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_a_short_lease_expires_on_the_database_clock(
    make_backend: Callable[..., DatabaseBackend],
    host_clock_an_hour_ahead: Callable[[], float],
    far_session_zone: list[str],
) -> None:
    """Live at once, expired about a lease later: an hour of skew would show either way."""
    backend = make_backend()
    name = f"clock.{uuid.uuid4().hex[:8]}"
    short = backend.open_session(1.0, "short").session_id
    started = time.monotonic()
    assert backend.acquire(short, name) is not None
    assert backend.owner(name) is not None
    wait_until(lambda: backend.owner(name) is None, 5, message="expiry of a 1 s lease")
    assert 0.5 < time.monotonic() - started < 5
    with pytest.raises(Exception) as caught:
        backend.keep_alive(short, 1.0)
    assert type(caught.value).__name__ == "SessionExpired"
