"""An expired session is never revived, not even by a call that started before it expired.

A call that waits for a row lock judges the session once it holds the lock, on
the clock of that moment: a take-over that judged the session dead meanwhile
stays right. The other connection (the "outsider") holds the lock at the moment
that matters, so each interleaving is forced instead of hoped for.
"""

from __future__ import annotations

import uuid

import pytest

from django_simba.backends.database import DatabaseBackend
from django_simba.spi import SessionExpired
from django_simba.testing import wait_until

from .conftest import Outsider, each_alias
from .test_races import Call, wait_blocked

#: Long enough for the call to be on its way before the session expires, on a loaded machine.
LEASE = 1.5


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"revival.{suffix}", f"revival.group.{suffix}"


def wait_expired(outsider: Outsider, session_id: str) -> None:
    wait_until(lambda: outsider.session_expired(session_id), 5, message="the session to expire")


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

    # A take-over holds the holder's row in share mode while it judges the holder...
    outsider.begin()
    outsider.share_lock_session(holder)
    renewal = Call(lambda: backend.keep_alive(holder, 30))
    wait_blocked(outsider, renewal)
    # ...and the session expires before it lets go: the renewal sent before the expiry comes too late.
    wait_expired(outsider, holder)
    outsider.commit()

    with pytest.raises(SessionExpired):
        renewal.result()
    assert_not_revived(backend, holder, name, group)
