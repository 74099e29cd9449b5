"""Celery: the prefork main process holds nothing, and a warm shutdown closes every pool process's session."""

from __future__ import annotations

import signal
import uuid

import pytest

from django_simba.testing import wait_until
from tests.deploy.conftest import BOOT, LEASE, live_sessions, record_take_over, wait_for_leader

pytestmark = pytest.mark.redis


def celery_worker(pool: str, *options: str) -> list[str]:
    queue = f"deploy-{uuid.uuid4().hex[:8]}"  # tasks of other runs never reach this worker
    quiet = ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    named = ["--hostname", f"{queue}@%h", "--queues", queue, "--loglevel", "info"]
    return ["celery", "-A", "deploysite", "worker", "--pool", pool, *named, *quiet, *options]


def test_prefork_main_holds_nothing_and_warm_shutdown_closes_the_pool(
    start_server, backend, candidate, election_name
):
    server = start_server(celery_worker("prefork", "--concurrency", "2"))

    def pool_up() -> set[int] | None:
        pool = server.children()
        return pool if len(pool) == 2 and len(live_sessions(backend, pool)) == 2 else None

    pool = wait_until(pool_up, BOOT, interval=0.05, message="two pool processes with a session each")
    assert wait_for_leader(backend, election_name) in pool
    server.wait_log(" ready.")  # the main process has started consuming: it is fully up
    assert live_sessions(backend, {server.pid}) == []

    waiting = candidate()
    sent = server.signal(signal.SIGTERM)  # warm shutdown
    assert server.wait_exit() == 0
    assert live_sessions(backend, pool | {server.pid}) == []
    took = record_take_over("celery prefork, warm shutdown (TERM)", sent, waiting.wait_elected(LEASE / 2))
    assert took < LEASE / 2  # closed, not expired


def test_solo_main_process_serves_and_closes_on_warm_shutdown(
    start_server, backend, candidate, election_name
):
    server = start_server(celery_worker("solo"))
    assert wait_for_leader(backend, election_name) == server.pid
    server.wait_log(" ready.")
    waiting = candidate()
    sent = server.signal(signal.SIGTERM)
    assert server.wait_exit() == 0
    assert live_sessions(backend, {server.pid}) == []
    record_take_over("celery solo, warm shutdown (TERM)", sent, waiting.wait_elected(LEASE / 2))
