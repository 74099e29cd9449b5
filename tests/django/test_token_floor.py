"""Tokens across a backend move (issue 23): rows fenced under PostgreSQL refused every write after the
project moved to Redis, since the new backend's tokens start again low. ``simba_tokens`` prints the
highest token on the old backend; ``TOKEN_FLOOR`` set to it on the new one lifts every token above.

The fenced rows stay in PostgreSQL's test database; the lease moves between the database backend on
PostgreSQL, Redis (the shared test server) and the database backend on MariaDB. Each move is checked
both ways: without the floor the first write is refused, with ``simba_tokens``'s figure it is taken.
"""

from __future__ import annotations

import io
import json
import re
import uuid

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from django_simba import StaleToken, lock, owner
from django_simba.fencing import fenced_update
from django_simba.spi.floor import with_token_floor
from django_simba.testing import wait_until
from tests.backends.database.conftest import reachable
from tests.conftest import server_missing
from tests.django.engines import reset_engine
from tests.django.processes import redis_url_or_skip
from tests.fencing.models import MODELS, Document

FAST = {"LEASE_DURATION": 3, "RENEW_INTERVAL": 1}
POSTGRESQL = {"BACKEND": "database", "OPTIONS": {"alias": "postgresql"}, **FAST}
#: The floor of a project that moved before: its tokens are above the clock Redis takes new ones from.
EARLIER_FLOOR = 10**17

pytestmark = [
    pytest.mark.postgresql,
    pytest.mark.mysql,
    pytest.mark.redis,
    pytest.mark.django_db(
        databases=["default", "postgresql", "mysql"], transaction=True, available_apps=["django_simba"]
    ),
]


@pytest.fixture
def documents():
    """The fenced table, in PostgreSQL (where the project's data stays through the move)."""
    from django.db import connections

    with connections["postgresql"].schema_editor() as editor:
        for model in MODELS:
            editor.create_model(model)
    yield Document.objects.using("postgresql")
    with connections["postgresql"].schema_editor() as editor:
        for model in reversed(MODELS):
            editor.delete_model(model)


def write(rows, name: str) -> int:
    """One fenced write under a new term of ``name``; its token."""
    with lock(name, timeout=5) as term:
        fenced_update(rows, term, body=f"written under {term.token}")
        return term.token


def take_a_term(name: str) -> int:
    """A term of ``name`` that fences nothing; its token."""
    with lock(name, timeout=5) as term:
        return term.token


def tokens_report(*args: str) -> dict:
    out = io.StringIO()
    call_command("simba_tokens", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


def redis_backend() -> dict:
    return {"BACKEND": "redis", "OPTIONS": {"url": redis_url_or_skip()}, **FAST}


def mysql_backend() -> dict:
    if not reachable("mysql"):
        server_missing("MariaDB")
    return {"BACKEND": "database", "OPTIONS": {"alias": "mysql"}, **FAST}


def forget_on_redis(name: str) -> None:
    """What a minute without a term does to the name's hash on Redis: it expires (done at once here)."""
    import redis

    from django_simba.backends.redis.keys import lease_key

    client = redis.Redis.from_url(redis_url_or_skip())
    try:
        assert client.pexpire(lease_key(name), 1)
        wait_until(lambda: not client.exists(lease_key(name)), 10, message="the name's hash expired")
    finally:
        client.close()


#: (the backend moved from, the one moved to): a dict, or a function that makes it (it may skip).
MOVES = {
    # Redis takes a new name's token from its clock: the old tokens must be above it to be refused.
    "postgresql-to-redis": (lambda: {**POSTGRESQL, "TOKEN_FLOOR": EARLIER_FLOOR}, redis_backend),
    "postgresql-to-mariadb": (lambda: POSTGRESQL, mysql_backend),
    # The name's hash expired on Redis before the move: no scan finds its token, the clock covers it.
    "redis-to-postgresql": (redis_backend, lambda: POSTGRESQL),
}


@pytest.mark.parametrize("move", list(MOVES))
def test_rows_fenced_on_the_old_backend_take_writes_on_the_new_one_above_the_floor(documents, move):
    old_backend, new_backend = (make() for make in MOVES[move])
    name = f"move:{uuid.uuid4().hex[:10]}"
    documents.create(key=name)
    rows = documents.filter(key=name)
    with override_settings(SIMBA=old_backend):
        try:
            tokens = [write(rows, name) for _ in range(5)]
            if old_backend["BACKEND"] == "redis":
                forget_on_redis(name)
            report = tokens_report()
        finally:
            reset_engine()
    floor = int(report["highest"])
    assert tokens == sorted(tokens) and floor >= tokens[-1]
    if old_backend["BACKEND"] == "redis":
        assert name not in report["tokens"]  # what a scan of the hashes would have missed

    with override_settings(SIMBA=new_backend):  # moved, nothing else changed
        try:
            with lock(name, timeout=5) as term:
                assert term.token <= tokens[-1]
                with pytest.raises(StaleToken):
                    fenced_update(rows, term, body="refused")
        finally:
            reset_engine()

    with override_settings(SIMBA={**new_backend, "TOKEN_FLOOR": floor}):
        try:
            token = write(rows, name)
            assert token > floor  # every token of the new backend above the old ones
            with lock(name, timeout=5) as term:
                assert term.token > token  # and still growing
                assert owner(name).token == term.token  # what the tools show is what fences
        finally:
            reset_engine()
    assert rows.get().fence_token == token


def test_on_redis_the_highest_token_is_the_servers_clock_and_the_names_held_are_listed():
    import redis

    name = f"tokens:{uuid.uuid4().hex[:10]}"
    client = redis.Redis.from_url(redis_url_or_skip())
    with override_settings(SIMBA={**redis_backend(), "TOKEN_FLOOR": 1000}):
        try:
            with lock(name, timeout=5) as term:
                seconds, micros = client.time()
                before = seconds * 1_000_000 + micros + 1000
                report = tokens_report("--prefix", "tokens:")
                out = io.StringIO()
                call_command("simba_tokens", "--prefix", name, stdout=out)
        finally:
            reset_engine()
            client.close()
    assert report["tokens"][name] == term.token
    assert report["highest"] == report["clock"] >= max(before, term.token)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["NAME", "TOKEN"] and lines[1].split() == [name, str(term.token)]
    assert "clock in microseconds (TOKEN_FLOOR 1000 included)" in lines[2]
    said = re.fullmatch(r"Highest token on the redis backend: (\d+)\. .* = (\d+)\.", lines[3])
    assert said and said[1] == said[2] and int(said[1]) >= report["highest"]


def test_on_a_redis_cluster_the_highest_token_is_the_latest_clock_of_its_primaries():
    from tests.servers.redis_cluster import need_redis_binaries, redis_cluster

    need_redis_binaries()
    with redis_cluster(masters=3) as cluster:
        clocks = []
        for node in cluster.nodes:
            with node.client() as client:
                seconds, micros = client.time()
                clocks.append(seconds * 1_000_000 + micros)
        simba = {"BACKEND": "redis", "OPTIONS": {"startup_nodes": cluster.startup_nodes, "cluster": True}}
        with override_settings(SIMBA={**simba, **FAST}):
            try:
                token = take_a_term("tokens:on-a-cluster")
                report = tokens_report()
            finally:
                reset_engine()
    assert report["highest"] == report["clock"] >= max([*clocks, token])
    assert report["tokens"] == {}  # nothing held now


@pytest.mark.parametrize(
    "simba",
    [{"BACKEND": "zookeeper", "OPTIONS": {"hosts": "127.0.0.1:1"}}, {"BACKEND": "memory"}],
    ids=["zookeeper", "memory"],
)
def test_a_backend_that_lists_no_tokens_says_where_to_look_and_exits_1(simba):
    with override_settings(SIMBA=simba), pytest.raises(CommandError, match=r"docs/moving\.rst") as raised:
        call_command("simba_tokens", stdout=io.StringIO())
    assert raised.value.returncode == 1


def test_a_floor_lifts_every_token_in_and_out_of_a_backend():
    from django_simba.backends.memory import MemoryBackend

    inner = MemoryBackend(timeout=1)
    floored = with_token_floor(inner, 1000)
    session = floored.open_session(30, "s").session_id
    grant = floored.acquire(session, "n")
    assert grant.token == 1001 and inner.owner("n").token == 1
    assert floored.keep_alive(session, 30).owned == {"n": 1001}
    assert floored.owner("n").token == 1001 and [i.token for i in floored.leases()] == [1001]
    assert floored.release(session, "n", 1001).held is not False
    assert inner.owner("n") is None
    assert floored.release(session, "n", 999).held is False  # a token from before the floor
    assert with_token_floor(inner, 0) is inner
    assert floored.vendor == inner.vendor and floored.needs_purge == inner.needs_purge


@pytest.mark.parametrize("value", [-1, 1.5, "7", True, 2**63])
def test_a_floor_out_of_range_is_a_check_error(value):
    from django_simba.checks import check_settings

    with override_settings(SIMBA={"BACKEND": "memory", "TOKEN_FLOOR": value}):
        assert "django_simba.E018" in [m.id for m in check_settings()]
