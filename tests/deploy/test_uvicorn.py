"""uvicorn: with the lifespan wrapper, SIGTERM closes every worker's session (without it, none);
200 concurrent requests to an async view take one ``alock`` in turn.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import time
import uuid

import pytest

from django_simba.testing import wait_until
from tests.deploy.conftest import BOOT, LEASE, live_sessions, record_take_over, wait_for_leader
from tests.servers.ports import free_port

pytestmark = pytest.mark.redis


def uvicorn(application: str, *options: str) -> list[str]:
    return ["uvicorn", "--host", "127.0.0.1", "--port", str(free_port()), *options, application]


def test_sigterm_closes_the_workers_sessions_through_the_lifespan(
    start_server, backend, candidate, election_name
):
    server = start_server(uvicorn("deploysite.asgi:application", "--workers", "2"))

    def workers_up() -> set[int] | None:
        workers = server.children()
        started = server.output().count("Application startup complete")
        return workers if started == 2 and len(live_sessions(backend, workers)) == 2 else None

    workers = wait_until(workers_up, BOOT, interval=0.05, message="two workers started, with a session each")
    assert wait_for_leader(backend, election_name) in workers
    assert live_sessions(backend, {server.pid}) == []  # the supervisor never loads the application
    waiting = candidate()
    sent = server.signal(signal.SIGTERM)
    assert server.wait_exit() == 0
    assert live_sessions(backend, workers) == []
    took = record_take_over("uvicorn --workers 2, TERM (lifespan)", sent, waiting.wait_elected(LEASE / 2))
    assert took < LEASE / 2  # closed, not expired


def test_a_single_process_closes_through_the_lifespan_too(start_server, backend, candidate, election_name):
    server = start_server(uvicorn("deploysite.asgi:application"))
    server.wait_log("Application startup complete")
    assert wait_for_leader(backend, election_name) == server.pid
    waiting = candidate()
    sent = server.signal(signal.SIGTERM)
    assert server.wait_exit() == -signal.SIGTERM  # uvicorn raised the signal again, as without us
    assert live_sessions(backend, {server.pid}) == []
    record_take_over("uvicorn, TERM (lifespan)", sent, waiting.wait_elected(LEASE / 2))


# -- 200 requests contending one alock under uvicorn --------------------------------------------

REQUESTS = 200
#: Generous: 200 holds of 5 ms take about a second; the machine is shared and loaded.
ALL_ANSWERED = 90.0


async def _get(port: int, target: str) -> dict[str, int]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {target} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
        await writer.drain()
        answer = await reader.read()
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"200", answer[:2000].decode(errors="replace")
    found: dict[str, int] = json.loads(body)
    return found


async def _all_at_once(port: int, target: str, count: int) -> list[dict[str, int]]:
    return await asyncio.wait_for(asyncio.gather(*(_get(port, target) for _ in range(count))), ALL_ANSWERED)


def _database_config() -> tuple[dict[str, object], dict[str, object]]:
    """The sample project on the test run's PostgreSQL database (migrated by pytest-django)."""
    from django.db import connections

    database = dict(connections["postgresql"].settings_dict)
    keys = ("ENGINE", "NAME", "USER", "PASSWORD", "HOST", "PORT")
    return {"default": {key: database[key] for key in keys}}, {
        "BACKEND": "database",
        "OPTIONS": {"alias": "default"},
    }


@pytest.mark.parametrize(
    "backend_name",
    [
        "redis",
        pytest.param(
            "postgresql",
            marks=[
                pytest.mark.postgresql,
                pytest.mark.django_db(transaction=True, databases=["default", "postgresql"]),
            ],
        ),
    ],
)
def test_two_hundred_requests_take_an_alock_in_turn(start_server, backend, backend_name):
    """200 concurrent requests to 2 workers, each holding one name 5 ms in an async view: all get it,
    one at a time (no two holds overlap, on the host's monotonic clock), with increasing tokens."""
    if backend_name == "postgresql":
        databases, simba = _database_config()
        extra = {"DEPLOY_DATABASES": json.dumps(databases)}
    else:
        simba, extra = {}, {}
    port = free_port()
    argv = ["uvicorn", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"]
    server = start_server([*argv, "deploysite.asgi:application"], simba=simba, extra_env=extra)
    wait_until(
        lambda: server.output().count("Application startup complete") == 2,
        BOOT,
        interval=0.05,
        message="two workers started",
    )
    name = f"deploy:crit:{uuid.uuid4().hex[:12]}"
    started = time.monotonic()
    holds = asyncio.run(_all_at_once(port, f"/critical/?name={name}", REQUESTS))
    took = time.monotonic() - started
    assert len(holds) == REQUESTS
    holds.sort(key=lambda hold: hold["entered"])
    for before, after in itertools.pairwise(holds):
        assert before["left"] <= after["entered"], f"two holds overlap: {before} and {after}"
        assert before["token"] < after["token"], f"the token did not increase: {before} then {after}"
    pids = {hold["pid"] for hold in holds}
    assert len(pids) == 2, f"one worker served every request: {pids}"
    print(
        f"{backend_name}: {REQUESTS} holds of 5 ms in {took:.2f} s by workers {sorted(pids)}, "
        f"at most {max(hold['threads'] for hold in holds)} threads in a worker"
    )
