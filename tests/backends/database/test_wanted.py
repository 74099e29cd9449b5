"""A release tells its holder whether another session was turned away during the term.

MySQL and SQLite waiters poll: they cannot be woken by a release, and without this
hint the releaser would take the name straight back every time (the engine then
steps aside for a moment instead). PostgreSQL wakes its waiters with NOTIFY and
gives no hint.
"""

from __future__ import annotations

import uuid

import pytest

from django_simba.backends.database import DatabaseBackend

from .conftest import each_alias


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_a_release_reports_a_refusal_during_its_term(backend: DatabaseBackend, alias: str) -> None:
    name = f"wanted-{uuid.uuid4().hex[:8]}"
    holder = backend.open_session(30, "holder").session_id
    other = backend.open_session(30, "other").session_id
    try:
        first = backend.acquire(holder, name)
        assert first is not None
        assert backend.acquire(other, name) is None  # refused: the name is now wanted
        expected_after_refusal = None if alias == "postgresql" else True
        assert backend.release(holder, name, first.token).contended is expected_after_refusal

        second = backend.acquire(holder, name)  # a new term starts with nobody turned away
        assert second is not None and second.token > first.token
        no_refusal = None if alias == "postgresql" else False
        assert backend.release(holder, name, second.token).contended is no_refusal

        assert backend.release(holder, name, second.token).contended is None  # nothing freed: no hint
        assert backend.acquire(other, name) is not None  # the refusal left the name free to take
    finally:
        backend.close_session(holder)
        backend.close_session(other)
