"""PostgreSQL and MySQL acquire in one round trip what needs no lock, and lock only for the rest.

A released row and a live holder take one round trip (on PostgreSQL a refusal
writes nothing, not even a row lock), and so does a new name on MySQL. A holder
that looks dead, or the caller itself, goes on to the locked take-over in a
second one, as does a new name on PostgreSQL (whose first statement only takes
rows that exist: its plan stays small for the cycle every lock repeats).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from django_simba.backends.database import DatabaseBackend
from django_simba.spi import Grant, SessionExpired
from django_simba.testing import wait_until

from .conftest import Outsider, on

pytestmark = pytest.mark.parametrize(
    ("alias", "style"),
    [
        pytest.param("postgresql", "statement", marks=on("postgresql"), id="postgresql"),
        pytest.param("mysql", "returning", marks=on("mysql"), id="mariadb-returning"),
        pytest.param("mysql", "batch", marks=on("mysql"), id="mysql-batch"),
    ],
    indirect=["alias"],
)


@pytest.fixture(autouse=True)
def acquire_style(backend: DatabaseBackend, style: str) -> None:
    """MySQL has no RETURNING: on MariaDB, the batch MySQL would use is tested too."""
    if style == "batch":
        backend.dialect.returning = False  # type: ignore[attr-defined]


@pytest.fixture
def sessions(backend: DatabaseBackend) -> Iterator[list[str]]:
    opened: list[str] = []
    yield opened
    for session_id in opened:
        backend.close_session(session_id)


def open_session(backend: DatabaseBackend, sessions: list[str], lease: float = 30) -> str:
    session_id = backend.open_session(lease, "paths").session_id
    sessions.append(session_id)
    return session_id


def round_trips(backend: DatabaseBackend, session_id: str, name: str) -> tuple[Grant | None, int]:
    before = backend.traffic.round_trips
    grant = backend.acquire(session_id, name)
    return grant, backend.traffic.round_trips - before


def row_versions(outsider: Outsider, name: str) -> tuple[str, str]:
    """The row's xmin and xmax: a write or a row lock changes one of them."""
    [(xmin, xmax)] = outsider.execute(
        "SELECT xmin::text, xmax::text FROM simba_lease WHERE name = %s", (name,)
    )
    return xmin, xmax


def test_a_released_name_takes_one_round_trip_and_a_new_one_one_or_two(
    backend: DatabaseBackend, sessions: list[str], alias: str
) -> None:
    name = f"paths-{uuid.uuid4().hex[:8]}"
    me = open_session(backend, sessions)
    first, trips = round_trips(backend, me, name)
    assert first is not None and first.token == 1 and trips == (2 if alias == "postgresql" else 1)
    backend.release(me, name, first.token)
    second, trips = round_trips(backend, me, name)
    assert second is not None and second.token == 2 and trips == 1
    backend.release(me, name, second.token)
    third, trips = round_trips(backend, me, name)
    assert third is not None and third.token == 3 and trips == 1


def test_a_new_name_is_created_once_when_two_sessions_race_for_it(
    backend: DatabaseBackend, sessions: list[str]
) -> None:
    """On PostgreSQL the locked batch creates the row: the loser of the race finds it held."""
    from concurrent.futures import ThreadPoolExecutor

    name = f"paths-{uuid.uuid4().hex[:8]}"
    first, second = open_session(backend, sessions), open_session(backend, sessions)
    with ThreadPoolExecutor(2) as pool:
        grants = list(pool.map(lambda session_id: backend.acquire(session_id, name), [first, second]))
    won = [grant for grant in grants if grant is not None]
    assert len(won) == 1 and won[0].token == 1


def test_a_live_holder_is_refused_in_one_round_trip(
    backend: DatabaseBackend, sessions: list[str], outsider: Outsider, alias: str
) -> None:
    name = f"paths-{uuid.uuid4().hex[:8]}"
    holder, other = open_session(backend, sessions), open_session(backend, sessions)
    assert backend.acquire(holder, name) is not None
    versions = row_versions(outsider, name) if alias == "postgresql" else None
    refused, trips = round_trips(backend, other, name)
    assert refused is None and trips == 1
    if alias == "postgresql":  # MySQL marks the row wanted (see test_wanted)
        assert row_versions(outsider, name) == versions


def test_a_dead_holder_is_taken_over_with_the_row_locked(
    backend: DatabaseBackend, sessions: list[str], outsider: Outsider
) -> None:
    name = f"paths-{uuid.uuid4().hex[:8]}"
    dying, other = open_session(backend, sessions), open_session(backend, sessions)
    held = backend.acquire(dying, name)
    assert held is not None
    backend.keep_alive(dying, 0.05)  # the holder's last renewal: it dies now, whatever the load
    wait_until(lambda: backend.owner(name) is None, 5, message="the holder's session to expire")
    taken, trips = round_trips(backend, other, name)
    assert taken is not None and taken.token == held.token + 1 and trips == 2
    assert backend.owner(name).session_id == other  # type: ignore[union-attr]


def test_the_holder_asking_again_keeps_its_term(
    backend: DatabaseBackend, sessions: list[str], alias: str
) -> None:
    name = f"paths-{uuid.uuid4().hex[:8]}"
    me = open_session(backend, sessions)
    held = backend.acquire(me, name)
    assert held is not None
    again, trips = round_trips(backend, me, name)
    # MySQL's first round trip reads the row back and finds the caller there.
    assert again is not None and again.token == held.token and trips == (2 if alias == "postgresql" else 1)


def test_the_first_round_trip_is_one_statement_where_the_server_can_answer_in_it(
    backend: DatabaseBackend, sessions: list[str], style: str
) -> None:
    me = open_session(backend, sessions)
    name = f"paths-{uuid.uuid4().hex[:8]}"
    backend.release(me, name, backend.acquire(me, name).token)  # type: ignore[union-attr]
    before = backend.traffic.snapshot()
    assert backend.acquire(me, name) is not None
    trips, statements = (after - first for after, first in zip(backend.traffic.snapshot(), before))
    assert (trips, statements) == (1, 2 if style == "batch" else 1)


def expire(backend: DatabaseBackend, session_id: str) -> None:
    wait_until(
        lambda: all(s.remaining <= 0 for s in backend.sessions() if s.session_id == session_id),
        5,
        message="the short session to expire",
    )


def test_an_expired_caller_is_told_so_whether_the_row_is_released_or_held(
    backend: DatabaseBackend, sessions: list[str]
) -> None:
    released, held = f"paths-{uuid.uuid4().hex[:8]}", f"paths-{uuid.uuid4().hex[:8]}"
    other = open_session(backend, sessions)
    first = backend.acquire(other, released)
    assert first is not None and backend.acquire(other, held) is not None
    backend.release(other, released, first.token)
    short = open_session(backend, sessions, lease=0.3)
    expire(backend, short)
    for name in (released, held):
        with pytest.raises(SessionExpired):
            backend.acquire(short, name)
    assert backend.owner(released) is None and backend.owner(held).session_id == other  # type: ignore[union-attr]
    again = backend.acquire(other, released)
    assert again is not None and again.token > first.token


def test_a_release_after_the_session_expired_says_the_term_was_not_held(
    backend: DatabaseBackend, sessions: list[str]
) -> None:
    name = f"paths-{uuid.uuid4().hex[:8]}"
    short = open_session(backend, sessions)
    taken = backend.acquire(short, name)
    assert taken is not None
    backend.keep_alive(short, 0.05)  # a short lease only after the acquire: a loaded machine may be slow
    expire(backend, short)
    assert backend.release(short, name, taken.token).held is False
    other = open_session(backend, sessions)
    after = backend.acquire(other, name)
    assert after is not None and after.token > taken.token
