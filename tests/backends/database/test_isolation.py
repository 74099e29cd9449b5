"""The backend works on connections of its own, never inside the caller's transaction."""

from __future__ import annotations

import uuid

import pytest
from django.db import connections, transaction
from django.test.utils import CaptureQueriesContext

from django_simba.backends.database import DatabaseBackend
from django_simba.models import Lease
from django_simba.spi import Grant

from .conftest import Rollback, each_alias


# SQLite, whose tables belong in a file of their own: test_sqlite_transactions.py.
@pytest.mark.parametrize("alias", [p for p in each_alias() if p.values[0] != "sqlite"], indirect=True)
def test_a_rolled_back_user_transaction_does_not_undo_an_acquire(
    alias: str, backend: DatabaseBackend
) -> None:
    name = f"iso.{uuid.uuid4().hex[:8]}"
    users_row = f"iso.user.{uuid.uuid4().hex[:8]}"
    sid = backend.open_session(30, "in a transaction").session_id

    def users_work() -> None:
        with transaction.atomic(using=alias):
            Lease.objects.using(alias).create(name=users_row, token=7)  # the user's transaction writes first
            grant = backend.acquire(sid, name)
            granted.append(grant)
            raise Rollback

    granted: list[Grant | None] = []
    with pytest.raises(Rollback):
        users_work()
    (grant,) = granted
    assert grant is not None
    assert not Lease.objects.using(alias).filter(name=users_row).exists()
    info = backend.owner(name)
    assert info is not None and info.session_id == sid and info.token == grant.token
    backend.close_session(sid)


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_the_callers_connection_is_never_used(alias: str, backend: DatabaseBackend) -> None:
    name = f"iso.{uuid.uuid4().hex[:8]}"
    users = connections[alias]
    with CaptureQueriesContext(users) as queries:
        sid = backend.open_session(30, "own connections").session_id
        assert backend.acquire(sid, name) is not None
        backend.keep_alive(sid, 30)
        backend.join(sid, name)
        backend.release(sid, name)
        backend.close_session(sid)
    assert len(queries) == 0
    assert backend.traffic.round_trips >= 6
