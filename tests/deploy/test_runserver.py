"""runserver: only the serving child holds a session, and the stops that let it close do."""

from __future__ import annotations

import os
import signal

import pytest

from django_simba.testing import wait_until
from tests.deploy.conftest import BOOT, LEASE, live_sessions, record_take_over, wait_for_leader
from tests.servers.ports import free_port

pytestmark = pytest.mark.redis


def runserver(*options: str) -> list[str]:
    return ["python", "manage.py", "runserver", *options, f"127.0.0.1:{free_port()}"]


def reloader_up(server, backend) -> int:
    """Wait until the watcher's serving child runs with a session; its pid."""

    def child() -> int | None:
        children = server.children()
        return next(iter(children)) if len(children) == 1 and live_sessions(backend, children) else None

    return wait_until(child, BOOT, interval=0.05, message="the serving child with a session")


def test_the_watcher_holds_nothing_and_sigterm_to_the_child_closes(
    start_server, backend, candidate, election_name
):
    server = start_server(runserver())
    child = reloader_up(server, backend)
    assert wait_for_leader(backend, election_name) == child
    assert live_sessions(backend, {server.pid}) == []  # its election in ready() waits: it never serves
    waiting = candidate()
    sent = time_of_kill(child, signal.SIGTERM)
    assert server.wait_exit() == 0  # the child left with 0, and the watcher with it
    assert live_sessions(backend, {server.pid, child}) == []
    took = record_take_over("runserver, TERM to the serving child", sent, waiting.wait_elected(LEASE / 2))
    assert took < LEASE / 2  # closed, not expired


def test_ctrl_c_closes(start_server, backend, candidate, election_name):
    server = start_server(runserver())
    child = reloader_up(server, backend)
    wait_for_leader(backend, election_name, among={child})
    waiting = candidate()
    sent = time_of_kill(-server.pid, signal.SIGINT)  # what Ctrl+C sends: the whole process group
    server.wait_exit()
    wait_until(lambda: not os.path.exists(f"/proc/{child}"), BOOT, message="the child exited")
    assert live_sessions(backend, {server.pid, child}) == []
    record_take_over("runserver, Ctrl+C (INT to the group)", sent, waiting.wait_elected(LEASE / 2))


def test_noreload_closes_on_sigterm(start_server, backend, candidate, election_name):
    server = start_server(runserver("--noreload"))
    assert wait_for_leader(backend, election_name) == server.pid
    waiting = candidate()
    sent = server.signal(signal.SIGTERM)
    assert server.wait_exit() == -signal.SIGTERM  # still ended by the signal, as without django-simba
    assert live_sessions(backend, {server.pid}) == []
    record_take_over("runserver --noreload, TERM", sent, waiting.wait_elected(LEASE / 2))


def test_sigterm_to_the_watcher_closes_the_session_of_the_child_it_killed(
    start_server, backend, candidate, election_name
):
    """Django's watcher answers SIGTERM by killing its child with SIGKILL; the watcher closes for it."""
    server = start_server(runserver())
    child = reloader_up(server, backend)
    wait_for_leader(backend, election_name, among={child})
    waiting = candidate()
    sent = server.signal(signal.SIGTERM)
    assert server.wait_exit() == 0
    assert not os.path.exists(f"/proc/{child}")  # killed and reaped by the watcher
    assert live_sessions(backend, {server.pid, child}) == []
    took = record_take_over("runserver, TERM to the watcher", sent, waiting.wait_elected(LEASE / 2))
    assert took < LEASE / 2  # closed, not expired


def time_of_kill(pid: int, signum: int) -> float:
    import time

    sent = time.monotonic()
    os.kill(pid, signum)
    return sent
