"""The purge reclaims the lease rows of idle names, and a name's tokens never go back (SPEC rule 3).

Rows are deleted on PostgreSQL, MariaDB and SQLite, then the names are taken again: each new
token is above every token the name had before. The waits that guard the floor are shortened
here (``reclaim_idle``, ``floor_settles``), or the floor's age is moved back by hand.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest

from django_simba.backends.database import DatabaseBackend
from django_simba.backends.database import backend as database_backend
from django_simba.operations.status import purge
from django_simba.testing import wait_until

from .conftest import Outsider, each_alias

pytestmark = pytest.mark.parametrize("alias", each_alias(), indirect=True)


@pytest.fixture
def session(backend: DatabaseBackend) -> Iterator[str]:
    opened = backend.open_session(60, "reclaim").session_id
    yield opened
    backend.close_session(opened)


def names(count: int) -> list[str]:
    prefix = f"reclaim.{uuid.uuid4().hex[:10]}"
    return [f"{prefix}.{n}" for n in range(count)]


def cycle(backend: DatabaseBackend, session: str, name: str, times: int) -> list[int]:
    """Take and release ``name`` ``times`` times; the tokens of its terms."""
    tokens = []
    for _ in range(times):
        grant = backend.acquire(session, name)
        assert grant is not None
        tokens.append(grant.token)
        backend.release(session, name, grant.token)
    return tokens


def rows(outsider: Outsider, taken: list[str]) -> int:
    placeholders = ", ".join(["%s"] * len(taken))
    [(count,)] = outsider.execute(
        f"SELECT count(*) FROM simba_lease WHERE name IN ({placeholders})", tuple(taken)
    )
    return int(count)


def floor(outsider: Outsider) -> tuple[int, int]:
    [(raised, settled)] = outsider.execute("SELECT floor, settled FROM simba_reclaim WHERE id = 1")
    return int(raised), int(settled)


def reclaim_until_gone(backend: DatabaseBackend, outsider: Outsider, taken: list[str]) -> None:
    """Purge until the rows are gone: a first purge raises the floor, a later one deletes."""

    def purged() -> bool:
        purge(backend)  # what simba_purge and the engine's periodic purge call
        try:
            return rows(outsider, taken) == 0
        except sqlite3.OperationalError as error:
            # In SQLite's rollback journal mode, writers taking and releasing names in a tight
            # loop can keep this reader out past its 5 s busy timeout: read again.
            if "locked" not in str(error):
                raise
            return False

    wait_until(purged, 60, message="the rows reclaimed")


def test_idle_rows_go_and_each_name_starts_again_above_every_earlier_token(
    backend: DatabaseBackend, session: str, outsider: Outsider
) -> None:
    backend.reclaim_idle, backend.floor_settles = 0.0, 0.001
    taken = names(3)
    earlier = {
        name: cycle(backend, session, name, times) for name, times in zip(taken, (1, 4, 9), strict=True)
    }
    assert rows(outsider, taken) == 3
    reclaim_until_gone(backend, outsider, taken)
    highest = max(token for tokens in earlier.values() for token in tokens)
    assert floor(outsider)[1] >= highest  # the settled floor covers every deleted row
    for name, tokens in earlier.items():
        [again] = cycle(backend, session, name, 1)
        assert again > max(tokens), (name, tokens, again)
        assert again > highest  # every row made again starts above the floor
    [fresh] = cycle(backend, session, names(1)[0], 1)
    assert fresh > highest


def test_simba_tokens_counts_the_names_whose_rows_went(
    alias: str, backend: DatabaseBackend, session: str, outsider: Outsider
) -> None:
    """The highest token an operator reads to move away covers the reclaimed names too."""
    from django.test import override_settings

    from django_simba.operations.tokens import issued_tokens

    backend.reclaim_idle, backend.floor_settles = 0.0, 0.001
    taken = names(1)
    tokens = cycle(backend, session, taken[0], 5)
    reclaim_until_gone(backend, outsider, taken)
    with override_settings(SIMBA={"BACKEND": "database", "OPTIONS": {"alias": alias}, "TOKEN_FLOOR": 1000}):
        issued = issued_tokens()
    assert taken[0] not in issued.tokens
    assert issued.highest >= max(tokens) + 1000


def test_a_held_row_and_a_recently_freed_row_stay(
    backend: DatabaseBackend, session: str, outsider: Outsider
) -> None:
    backend.floor_settles = 0.001
    held, freed = names(2)
    assert backend.acquire(session, held) is not None
    cycle(backend, session, freed, 2)
    backend.reclaim_idle = 3600.0  # freed a moment ago: not idle
    for _ in range(3):
        purge(backend)
    assert rows(outsider, [held, freed]) == 2
    backend.reclaim_idle = 0.0  # idle now; the held row is not free
    wait_until(
        lambda: purge(backend) >= 0 and rows(outsider, [freed]) == 0, 30, message="the free row reclaimed"
    )
    assert rows(outsider, [held]) == 1
    assert backend.owner(held) is not None


def test_a_row_goes_only_once_the_floor_over_it_has_settled(
    backend: DatabaseBackend, session: str, outsider: Outsider
) -> None:
    """Until the floor raised over a row's token is older than any statement can run, a statement
    that makes the row again may have read the floor from before: the row stays."""
    backend.reclaim_idle, backend.floor_settles = 0.0, 3600.0
    taken = names(2)
    tokens = [token for name in taken for token in cycle(backend, session, name, 3)]
    outsider.execute("UPDATE simba_reclaim SET raised_at = 0")  # a floor raised long ago: due again
    purge(backend)
    raised, settled = floor(outsider)
    assert raised >= max(tokens) and settled < max(tokens)
    purge(backend)
    assert rows(outsider, taken) == 2  # raised, not yet settled
    outsider.execute(f"UPDATE simba_reclaim SET raised_at = raised_at - {3600 * 1000 + 1}")
    purge(backend)
    assert floor(outsider)[1] >= max(tokens)
    assert rows(outsider, taken) == 0
    for name in taken:
        assert cycle(backend, session, name, 1)[0] > max(tokens)


def test_each_transaction_deletes_at_most_the_limit(
    backend: DatabaseBackend, session: str, outsider: Outsider, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend.reclaim_idle, backend.floor_settles = 0.0, 3600.0
    taken = names(25)
    for name in taken:
        cycle(backend, session, name, 1)
    outsider.execute("UPDATE simba_reclaim SET raised_at = 0")
    backend.reclaim_idle_leases()  # raises the floor over the 25 rows (and whatever else is idle)
    outsider.execute(f"UPDATE simba_reclaim SET raised_at = raised_at - {3600 * 1000 + 1}")
    monkeypatch.setattr(database_backend, "RECLAIM_BATCHES", 2)
    others = outsider.execute("SELECT count(*) FROM simba_lease")[0][0] - rows(outsider, taken)
    assert backend.reclaim_idle_leases(limit=10) == min(20, 25 + others)
    assert backend.reclaim_idle_leases(limit=10) + rows(outsider, taken) <= 25


def test_names_taken_while_the_purge_reclaims_them_never_get_a_lower_token(
    make_backend: Callable[..., DatabaseBackend], outsider: Outsider
) -> None:
    """Two processes take and release one group of names over and over while a third purges with
    no idle wait and a one-second settle; the groups swap each time the idle group's rows are
    gone, so names are made again while the purge deletes others: every name's tokens keep
    rising across its deletions."""
    purger = make_backend()
    purger.reclaim_idle, purger.floor_settles = 0.0, 1.0
    groups = [names(4), names(4)]
    active = [0]
    seen: dict[str, list[int]] = {name: [] for group in groups for name in group}
    stop = threading.Event()
    failures: list[BaseException] = []

    def contend(index: int) -> None:
        backend = make_backend()
        session = backend.open_session(60, f"contender {index}").session_id
        try:
            while not stop.is_set():
                for name in groups[active[0]]:
                    grant = backend.acquire(session, name)
                    if grant is not None:
                        seen[name].append(grant.token)
                        backend.release(session, name, grant.token)
        except BaseException as error:
            failures.append(error)
        finally:
            backend.close_session(session)

    contenders = [threading.Thread(target=contend, args=(index,)) for index in range(2)]
    for thread in contenders:
        thread.start()
    try:
        for swap in range(4):
            wait_until(lambda: all(seen[name] for name in groups[active[0]]), 30, message="the group taken")
            if swap:  # the idle group's rows go while the other group is taken and released
                reclaim_until_gone(purger, outsider, groups[1 - active[0]])
            active[0] = 1 - active[0]
    finally:
        stop.set()
        for thread in contenders:
            thread.join(30)
    assert not failures, failures
    for name, tokens in seen.items():
        assert tokens and tokens == sorted(tokens) and len(set(tokens)) == len(tokens), (name, tokens)


def test_with_no_idle_row_the_reclaim_writes_nothing(
    make_backend: Callable[..., DatabaseBackend], outsider: Outsider
) -> None:
    """The purge runs when a session opens, in the background: its reclaim begins a write only
    when a row is idle. In a test's shared in-memory SQLite database, the test's own write failed
    at once ('database table is locked') whenever it came during that write transaction."""
    backend = make_backend(timeout=1.0)
    backend.reclaim_idle = 10 * 365 * 86400.0  # no row has been free that long
    insert = {
        "sqlite": "INSERT OR IGNORE INTO simba_reclaim (id, floor, settled, raised_at) VALUES (1, 0, 0, 0)",
        "mysql": "INSERT IGNORE INTO simba_reclaim (id, floor, settled, raised_at) VALUES (1, 0, 0, 0)",
        "postgresql": "INSERT INTO simba_reclaim (id, floor, settled, raised_at) VALUES (1, 0, 0, 0)"
        " ON CONFLICT (id) DO NOTHING",
    }[outsider.vendor]
    outsider.execute(insert)
    outsider.begin()  # on SQLite the database's write lock; elsewhere the floor's row, below
    try:
        outsider.execute(
            "SELECT floor FROM simba_reclaim WHERE id = 1 FOR UPDATE"
            if outsider.vendor != "sqlite"
            else "SELECT 1"
        )
        assert backend.reclaim_idle_leases() == 0  # a write would have waited, then timed out
    finally:
        outsider.rollback()
