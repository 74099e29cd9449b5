"""gunicorn: TERM and HUP close the workers' sessions; with --preload the master holds nothing."""

from __future__ import annotations

import signal

import pytest

from django_simba.testing import wait_until
from tests.deploy.conftest import (
    BOOT,
    LEASE,
    leader_pid,
    live_sessions,
    record_take_over,
    wait_for_leader,
    workers_up,
)
from tests.servers.ports import free_port

pytestmark = pytest.mark.redis


def gunicorn(*options: str) -> list[str]:
    import gunicorn.config

    names = {setting.name for setting in gunicorn.config.KNOWN_SETTINGS}
    # gunicorn 25+ opens a control socket in the home directory: one per machine, not per test
    quiet = ["--no-control-socket"] if "control_socket_disable" in names else []
    bind = f"127.0.0.1:{free_port()}"
    return ["gunicorn", *quiet, "--workers", "2", "--bind", bind, *options, "deploysite.wsgi"]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGQUIT], ids=lambda s: s.name)
def test_a_stop_closes_every_session_and_a_candidate_takes_over_at_once(
    start_server, backend, candidate, election_name, stop
):
    server = start_server(gunicorn())
    workers = workers_up(server, backend)
    assert wait_for_leader(backend, election_name) in workers
    waiting = candidate()
    sent = server.signal(stop)
    assert server.wait_exit() == 0
    assert live_sessions(backend, workers | {server.pid}) == []
    took = record_take_over(f"gunicorn {stop.name[3:]}", sent, waiting.wait_elected(LEASE / 2))
    assert took < LEASE / 2  # closed, not expired


def test_hup_closes_the_old_workers_sessions(start_server, backend, election_name):
    server = start_server(gunicorn())
    old = workers_up(server, backend)
    old_leader = wait_for_leader(backend, election_name, among=old)
    server.signal(signal.SIGHUP)
    new = workers_up(server, backend, not_among=frozenset(old))
    wait_until(lambda: not old & server.children(), BOOT, message="the old workers exited")
    assert live_sessions(backend, old) == []
    # The old leader's term was released on its way out: a new worker leads without waiting for expiry.
    assert wait_for_leader(backend, election_name, among=new, timeout=LEASE / 2) != old_leader
    assert live_sessions(backend, {server.pid}) == []


def test_a_preloading_master_holds_nothing_through_kill_and_hup(
    start_server, backend, candidate, election_name
):
    # Short leases here: a worker killed with SIGKILL cannot close its session, so it expires.
    server = start_server(gunicorn("--preload"), simba={"LEASE_DURATION": 3, "RENEW_INTERVAL": 1})
    workers = workers_up(server, backend)
    leader = wait_for_leader(backend, election_name, among=workers)
    assert live_sessions(backend, {server.pid}) == []

    server.kill_child(leader)
    workers = workers_up(server, backend, not_among=frozenset({leader}))
    assert wait_for_leader(backend, election_name, among=workers) in workers
    assert live_sessions(backend, {server.pid}) == []

    server.signal(signal.SIGHUP)
    workers = workers_up(server, backend, not_among=frozenset(workers))
    assert wait_for_leader(backend, election_name, among=workers) in workers
    assert live_sessions(backend, {server.pid}) == []
    assert leader_pid(backend, election_name) != server.pid

    waiting = candidate()
    sent = server.signal(signal.SIGTERM)
    assert server.wait_exit() == 0
    assert live_sessions(backend, server.tree() | workers) == []
    record_take_over("gunicorn --preload TERM", sent, waiting.wait_elected(LEASE / 2))


def test_a_daemonized_master_that_set_django_up_holds_nothing(
    start_server, backend, candidate, election_name, tmp_path
):
    """The config file sets Django up before gunicorn daemonizes: the daemon's fork keeps holding."""
    pidfile = tmp_path / "gunicorn.pid"
    config = ["--config", "setup_django.gunicorn.conf.py", "--daemon", "--pid", str(pidfile)]
    launcher = start_server(gunicorn(*config))
    launcher.wait_exit()  # the launcher forks the daemon and leaves
    master = wait_until(
        lambda: pidfile.exists() and pidfile.read_text().strip(), BOOT, message="the pid file"
    )
    daemon = launcher.adopt(int(master))
    workers = workers_up(daemon, backend)
    assert wait_for_leader(backend, election_name) in workers
    assert live_sessions(backend, {daemon.pid}) == []
    waiting = candidate()
    sent = daemon.signal(signal.SIGTERM)
    wait_until(
        lambda: not daemon.tree() - {daemon.pid} and not daemon.alive(), BOOT, message="the daemon stopped"
    )
    assert live_sessions(backend, workers | {daemon.pid}) == []
    record_take_over(
        "gunicorn --daemon, Django set up by the config, TERM", sent, waiting.wait_elected(LEASE / 2)
    )
