"""Take-overs against keep-alives, and calls against rows locked by someone else.

Another connection (the "outsider") plays the other party: it holds the locks a
take-over or a keep-alive would hold, at the moment that matters, so each
interleaving is forced instead of hoped for.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from django_simba.backends.database import DatabaseBackend
from django_simba.spi import BackendTimeout
from django_simba.testing import wait_until

from .calls import Call, wait_blocked
from .conftest import Outsider, each_alias


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_keep_alive_waiting_on_a_take_over_reports_the_lease_lost(
    backend: DatabaseBackend, outsider: Outsider
) -> None:
    name = f"race.{uuid.uuid4().hex[:8]}"
    holder = backend.open_session(30, "holder").session_id
    taker = backend.open_session(30, "taker").session_id
    held = backend.acquire(holder, name)
    kept = backend.acquire(holder, name + ".kept")
    assert held is not None and kept is not None

    # The take-over reads the holder's session in share mode, then moves the lease.
    outsider.begin()
    outsider.share_lock_session(holder)
    outsider.execute(
        "UPDATE simba_lease SET session_id = %s, token = token + 1 WHERE name = %s", (taker, name)
    )
    renewal = Call(lambda: backend.keep_alive(holder, 30))
    wait_blocked(outsider, renewal)
    outsider.commit()

    # The renewal went through after the take-over: it must not report the lease as still held.
    assert renewal.result().owned == {name + ".kept": kept.token}
    info = backend.owner(name)
    assert info is not None and info.session_id == taker and info.token == held.token + 1


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_take_over_waiting_on_a_keep_alive_sees_the_renewal(
    backend: DatabaseBackend, outsider: Outsider
) -> None:
    name = f"race.{uuid.uuid4().hex[:8]}"
    holder = backend.open_session(1.0, "holder").session_id
    taker = backend.open_session(30, "taker").session_id
    held = backend.acquire(holder, name)
    assert held is not None

    # The holder's keep-alive has its session row locked when the lease expires...
    outsider.begin()
    outsider.lock_session(holder)
    wait_until(lambda: backend.owner(name) is None, 5, message="the holder's lease to expire")
    take_over = Call(lambda: backend.acquire(taker, name))
    wait_blocked(outsider, take_over)
    # ...and commits a renewal: the take-over, which waited, must see the holder live.
    outsider.execute(
        f"UPDATE simba_session SET expires_at = {outsider.now_ms()} + 30000 WHERE session_id = %s", (holder,)
    )
    outsider.commit()

    assert take_over.result() is None
    info = backend.owner(name)
    assert info is not None and info.session_id == holder and info.token == held.token


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_a_take_over_sees_a_session_opened_while_it_waited(
    backend: DatabaseBackend, outsider: Outsider
) -> None:
    """A holder whose session and lease both committed while the take-over waited is live."""
    name = f"race.{uuid.uuid4().hex[:8]}"
    taker = backend.open_session(30, "taker").session_id
    newcomer = uuid.uuid4().hex
    outsider.begin()
    outsider.execute(
        "INSERT INTO simba_lease (name, session_id, token) VALUES (%s, '', 1)", (name,)
    )  # the lease row, locked until the newcomer's work commits
    take_over = Call(lambda: backend.acquire(taker, name))
    wait_blocked(outsider, take_over)
    outsider.execute(
        "INSERT INTO simba_session (session_id, expires_at, metadata)"
        f" VALUES (%s, {outsider.now_ms()} + 30000, '')",
        (newcomer,),
    )
    outsider.execute("UPDATE simba_lease SET session_id = %s, token = 2 WHERE name = %s", (newcomer, name))
    outsider.commit()

    assert take_over.result() is None
    info = backend.owner(name)
    assert info is not None and info.session_id == newcomer and info.token == 2
    backend.close_session(newcomer)


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_keep_alive_and_take_over_racing_never_both_hold(
    make_backend: Callable[..., DatabaseBackend],
) -> None:
    """Unforced races at the moment of expiry: the lease stays the holder's or leaves its renewal."""
    backend = make_backend()
    lease = 0.3
    outcomes = {"kept": 0, "taken": 0, "expired": 0}
    for _ in range(12):
        name = f"race.{uuid.uuid4().hex[:8]}"
        holder = backend.open_session(lease, "holder").session_id
        taker = backend.open_session(30, "taker").session_id
        opened = time.monotonic()
        assert backend.acquire(holder, name) is not None
        barrier = threading.Barrier(2)

        def renew(holder: str = holder, barrier: threading.Barrier = barrier) -> dict[str, int] | None:
            barrier.wait()
            try:
                return dict(backend.keep_alive(holder, 30).owned)
            except Exception as error:
                if type(error).__name__ == "SessionExpired":
                    return None
                raise

        def take(name: str = name, taker: str = taker, barrier: threading.Barrier = barrier) -> Any:
            barrier.wait()
            return backend.acquire(taker, name)

        # Aim both calls at the holder's expiry, a little before or after it.
        time.sleep(max(0.0, opened + lease - 0.01 - time.monotonic()))
        renewal, take_over = Call(renew), Call(take)
        owned, grant = renewal.result(), take_over.result()
        assert not (owned and name in owned and grant is not None), "both sessions hold the lease"
        outcomes["expired" if owned is None else "kept" if name in owned else "taken"] += 1
        for sid in (holder, taker):
            backend.close_session(sid)
    assert sum(outcomes.values()) == 12, outcomes


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_a_locked_session_row_times_out_instead_of_hanging(
    make_backend: Callable[..., DatabaseBackend], outsider: Outsider
) -> None:
    backend = make_backend(timeout=1.0)
    name = f"race.{uuid.uuid4().hex[:8]}"
    sid = backend.open_session(30, "locked").session_id
    assert backend.acquire(sid, name) is not None

    outsider.begin()
    outsider.lock_session(sid)
    started = time.monotonic()
    with pytest.raises(BackendTimeout):
        backend.keep_alive(sid, 30)
    elapsed = time.monotonic() - started
    assert 0.8 < elapsed < 2.0, elapsed
    outsider.rollback()

    # The failed connection was replaced: the next calls work.
    assert backend.keep_alive(sid, 30).owned == {name: 1}
    backend.close_session(sid)
