"""uvicorn: with the lifespan wrapper, SIGTERM closes every worker's session (without it, none)."""

from __future__ import annotations

import signal

import pytest

from django_simba.testing import wait_until
from tests.deploy.conftest import BOOT, LEASE, free_port, live_sessions, record_take_over, wait_for_leader

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
