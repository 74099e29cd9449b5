"""An expired session is never revived, not even by a call that started before it expired.

A call that waits for a row lock judges the session once it holds the lock, on
the clock of that moment: a take-over that judged the session dead meanwhile
stays right. The other connection (the "outsider") holds the lock at the moment
that matters, so each interleaving is forced instead of hoped for.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from django_simba.backends.database import DatabaseBackend
from django_simba.spi import SessionExpired
from django_simba.testing import wait_until

from .calls import Call, wait_blocked
from .conftest import Outsider, each_alias, on

#: Long enough for the call to be on its way before the session expires, on a loaded machine.
LEASE = 1.5

servers = pytest.mark.parametrize(
    "alias",
    [pytest.param(alias, marks=on(alias), id=alias) for alias in ("postgresql", "mysql")],
    indirect=True,
)


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"revival.{suffix}", f"revival.group.{suffix}"


def wait_expired(outsider: Outsider, session_id: str) -> None:
    wait_until(lambda: outsider.session_expired(session_id), 5, message="the session to expire")


def waited_past_expiry(
    outsider: Outsider, session_id: str, lock: Callable[[], None], call: Callable[[], Any]
) -> Call:
    """Run ``call`` while the outsider holds ``lock``, and let go only once the session expired."""
    outsider.begin()
    lock()
    pending = Call(call)
    wait_blocked(outsider, pending)
    wait_expired(outsider, session_id)
    outsider.commit()
    return pending


def assert_not_revived(backend: DatabaseBackend, session_id: str, name: str, group: str) -> None:
    """Neither the session nor anything it held is live again."""
    assert backend.owner(name) is None
    assert backend.members(group) == []
    assert [s for s in backend.sessions() if s.session_id == session_id and s.remaining > 0] == []
    with pytest.raises(SessionExpired):
        backend.keep_alive(session_id, 30)
    with pytest.raises(SessionExpired):
        backend.join(session_id, group)


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_a_renewal_that_waited_on_a_take_over_past_the_expiry_fails(
    backend: DatabaseBackend, outsider: Outsider
) -> None:
    name, group = names()
    holder = backend.open_session(LEASE, "holder").session_id
    assert backend.acquire(holder, name) is not None
    backend.join(holder, group)

    # A take-over holds the holder's row in share mode while it judges the holder, and the
    # session expires before it lets go: the renewal sent before the expiry comes too late.
    renewal = waited_past_expiry(
        outsider, holder, lambda: outsider.share_lock_session(holder), lambda: backend.keep_alive(holder, 30)
    )
    with pytest.raises(SessionExpired):
        renewal.result()
    assert_not_revived(backend, holder, name, group)


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_a_join_that_waited_past_the_expiry_fails(backend: DatabaseBackend, outsider: Outsider) -> None:
    name, group = names()
    member = backend.open_session(LEASE, "member").session_id
    assert backend.acquire(member, name) is not None

    # The session's row is locked for update (as a keep-alive or a close does) until after it expired.
    join = waited_past_expiry(
        outsider, member, lambda: outsider.lock_session(member), lambda: backend.join(member, group)
    )
    with pytest.raises(SessionExpired):
        join.result()
    assert_not_revived(backend, member, name, group)


@pytest.mark.parametrize(
    ("alias", "style"),
    [
        pytest.param("postgresql", "statement", marks=on("postgresql"), id="postgresql"),
        pytest.param("mysql", "returning", marks=on("mysql"), id="mariadb-returning"),
        pytest.param("mysql", "batch", marks=on("mysql"), id="mysql-batch"),
        pytest.param("sqlite", "statement", marks=on("sqlite"), id="sqlite"),
    ],
    indirect=["alias"],
)
def test_an_acquire_that_waited_on_the_lease_row_past_the_expiry_fails(
    backend: DatabaseBackend, outsider: Outsider, style: str
) -> None:
    if style == "batch":
        backend.dialect.returning = False  # type: ignore[attr-defined]  # MySQL's batch, on MariaDB
    name, group = names()
    caller = backend.open_session(LEASE, "caller").session_id
    other = backend.open_session(30, "other").session_id
    first = backend.acquire(other, name)
    assert first is not None
    backend.release(other, name, first.token)

    # The free row is locked (a release, a take-over) until the caller's session expired.
    acquire = waited_past_expiry(
        outsider, caller, lambda: outsider.lock_lease(name), lambda: backend.acquire(caller, name)
    )
    with pytest.raises(SessionExpired):
        acquire.result()
    assert_not_revived(backend, caller, name, group)
    # Whatever the dead session's acquire wrote, the name is free to the next acquirer.
    taken = backend.acquire(other, name)
    assert taken is not None and taken.token > first.token
    backend.close_session(other)


@servers
def test_a_purge_spares_a_session_renewed_while_it_looked_expired(
    backend: DatabaseBackend, outsider: Outsider
) -> None:
    name, _ = names()
    holder = backend.open_session(LEASE, "holder").session_id
    held = backend.acquire(holder, name)
    assert held is not None
    [(expiry,)] = outsider.execute("SELECT expires_at FROM simba_session WHERE session_id = %s", (holder,))

    # A keep-alive judged the session live and renewed it, and has not committed yet...
    outsider.begin()
    outsider.execute(
        f"UPDATE simba_session SET expires_at = {outsider.now_ms()} + 30000 WHERE session_id = %s", (holder,)
    )
    # ...when the old expiry passes: a purge reading the committed row finds the session expired.
    wait_until(
        lambda: outsider.execute(f"SELECT {outsider.now_ms()} > %s", (expiry,))[0][0],
        5,
        message="the old expiry to pass",
    )
    purge = Call(backend.purge_expired)
    wait_blocked(outsider, purge)
    outsider.commit()

    assert purge.result() == 0
    info = backend.owner(name)
    assert info is not None and info.session_id == holder and info.token == held.token
    assert backend.keep_alive(holder, 30).owned == {name: held.token}
    backend.close_session(holder)


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_a_purge_given_a_session_renewed_since_it_was_read_leaves_it(backend: DatabaseBackend) -> None:
    """The ids a purge read as expired may be stale when it writes: it removes only the still expired."""
    name, group = names()
    holder = backend.open_session(30, "holder").session_id
    held = backend.acquire(holder, name)
    assert held is not None
    backend.join(holder, group)
    removed = backend._run(lambda ex: backend.dialect.purge_sessions(ex, [holder]))  # a stale list
    assert removed.sessions == 0
    info = backend.owner(name)
    assert info is not None and info.session_id == holder and info.token == held.token
    assert [m.session_id for m in backend.members(group)] == [holder]
    backend.close_session(holder)
