"""uWSGI: workers forked from C each have a session of their own, the master none; stops close them.

Without ``lazy-apps`` (uWSGI's default) the master loads the sample project, then forks
the workers from C, without Python's fork hooks. uWSGI 2.0's signals to the master:
INT (``--stop``) kills the workers (each gets INT) and exits; TERM is a brutal reload,
or with ``die-on-term`` the same as INT; HUP (``--reload``) reloads gracefully (each
worker finishes its request and exits, then the master runs itself again); ``q`` on the
master FIFO shuts down gracefully.
"""

from __future__ import annotations

import itertools
import json
import signal
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from django_simba.testing import wait_until
from tests.conftest import server_missing
from tests.deploy.conftest import (
    BIN,
    BOOT,
    LEASE,
    STOP,
    leader_pid,
    live_sessions,
    record_take_over,
    wait_for_leader,
    workers_up,
)
from tests.servers.ports import free_port

pytestmark = pytest.mark.redis

WORKERS = 2


@pytest.fixture(autouse=True, scope="module")
def _uwsgi_installed() -> None:
    if not (BIN / "uwsgi").exists():
        server_missing("uWSGI (built by the test extras: pip compiles it with gcc and Python's headers)")


@dataclass
class Uwsgi:
    argv: list[str]
    url: str


def uwsgi(*options: str) -> Uwsgi:
    """uWSGI serving the sample project: a master and two workers, each of one thread."""
    port = free_port()
    argv = [
        "uwsgi",
        "--strict",
        "--master",
        "--processes",
        str(WORKERS),
        "--http-socket",
        f"127.0.0.1:{port}",
        "--module",
        "deploysite.wsgi:application",
        "--home",
        sys.prefix,
        "--need-app",
        *options,
    ]
    return Uwsgi(argv, f"http://127.0.0.1:{port}")


def take_turns(url: str, prefix: str) -> list[dict[str, object]]:
    """Every worker at once: a lock of its own, and a shared one in turn (the sample's ``turns/``)."""

    def one(_: int) -> dict[str, object]:
        with urllib.request.urlopen(f"{url}/turns/?prefix={prefix}&count={WORKERS}", timeout=BOOT) as reply:
            return json.loads(reply.read())

    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(one, range(WORKERS)))


def assert_a_session_and_a_term_each(turns: list[dict[str, object]], workers: set[int]) -> None:
    assert {turn["pid"] for turn in turns} == workers  # one request in each worker
    assert len({turn["session"] for turn in turns}) == WORKERS  # a session of its own each
    # each worker's own name is new: its first term takes the Redis server clock's microseconds
    assert all(abs(int(turn["own_token"]) / 1e6 - time.time()) < 600 for turn in turns)
    for turn in turns:  # the backend saw the shared name held by the session of the worker holding it
        assert turn["shared_held_by"] == turn["session"] and turn["shared_valid"]
    in_turn = sorted(turns, key=lambda turn: turn["acquired"])
    for before, after in itertools.pairwise(in_turn):
        assert before["released"] <= after["acquired"]  # one holder at a time
        # A new term each, with a greater token (not always the next one: under load a worker
        # waiting for the name was seen to get the one after).
        assert before["shared_token"] < after["shared_token"]


def threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def assert_held_by_workers_only(backend, server, workers: set[int], election_name: str) -> None:
    assert wait_for_leader(backend, election_name) in workers
    assert live_sessions(backend, {server.pid}) == []
    assert threads(server.pid) == 1  # uWSGI's own: none of ours runs in the master at its forks


@pytest.mark.parametrize(
    ("options", "stop", "what"),
    [
        ((), signal.SIGINT, "uWSGI INT (--stop)"),
        (("--enable-threads", "--die-on-term"), signal.SIGTERM, "uWSGI --enable-threads --die-on-term TERM"),
        # Python's exit handlers do not run: uWSGI's atexit hook closes
        (("--skip-atexit-teardown",), signal.SIGINT, "uWSGI --skip-atexit-teardown INT"),
        (("--lazy-apps",), signal.SIGINT, "uWSGI --lazy-apps INT (--stop)"),
    ],
    ids=["prefork", "prefork-enable-threads", "skip-atexit-teardown", "lazy-apps"],
)
def test_each_worker_holds_a_session_of_its_own_and_a_stop_closes_them(
    start_server, backend, candidate, election_name, options, stop, what
):
    served = uwsgi(*options)
    server = start_server(served.argv)
    workers = workers_up(server, backend, count=WORKERS)
    assert_held_by_workers_only(backend, server, workers, election_name)
    assert_a_session_and_a_term_each(take_turns(served.url, f"{election_name}.turns"), workers)
    assert live_sessions(backend, {server.pid}) == []

    waiting = candidate()
    sent = server.signal(stop)
    assert server.wait_exit() == 0
    assert live_sessions(backend, workers | {server.pid}) == []
    took = record_take_over(what, sent, waiting.wait_elected(LEASE / 2))
    assert took < LEASE / 2  # closed, not expired


def test_a_graceful_reload_and_shutdown_close_the_workers_sessions(
    start_server, backend, candidate, election_name, tmp_path: Path
):
    fifo = tmp_path / "master.fifo"
    served = uwsgi("--master-fifo", str(fifo))
    server = start_server(served.argv)
    old = workers_up(server, backend, count=WORKERS)
    old_leader = wait_for_leader(backend, election_name, among=old)
    assert live_sessions(backend, {server.pid}) == []

    server.signal(signal.SIGHUP)  # --reload: the master runs itself again, and loads the project again
    new = workers_up(server, backend, count=WORKERS, not_among=frozenset(old))
    assert live_sessions(backend, old) == []
    # The old leader released on its way out: a new worker leads without waiting for the expiry.
    assert wait_for_leader(backend, election_name, among=new, timeout=LEASE / 2) != old_leader
    assert live_sessions(backend, {server.pid}) == []
    assert_a_session_and_a_term_each(take_turns(served.url, f"{election_name}.turns"), new)

    waiting = candidate()
    wait_until(fifo.exists, BOOT, message="the master FIFO")
    sent = time.monotonic()
    fifo.write_bytes(b"q")  # a graceful shutdown
    assert server.wait_exit(STOP) == 0
    assert live_sessions(backend, new | {server.pid}) == []
    record_take_over("uWSGI graceful shutdown (FIFO q)", sent, waiting.wait_elected(LEASE / 2))


def test_a_worker_killed_outright_is_replaced_by_one_that_takes_the_candidacy(
    start_server, backend, election_name
):
    # Short leases: a worker killed with SIGKILL cannot close its session, so it expires.
    served = uwsgi()
    server = start_server(served.argv, simba={"LEASE_DURATION": 3, "RENEW_INTERVAL": 1})
    workers = workers_up(server, backend, count=WORKERS)
    leader = wait_for_leader(backend, election_name, among=workers)
    server.kill_child(leader)
    # The master forks a new worker, which contends with the candidacy the master kept for it.
    workers = workers_up(server, backend, count=WORKERS, not_among=frozenset({leader}))
    assert wait_for_leader(backend, election_name, among=workers) in workers
    assert live_sessions(backend, {server.pid}) == []
    assert leader_pid(backend, election_name) != server.pid


def test_the_hooks_keep_those_set_before_and_a_session_in_the_master_is_warned_of(monkeypatch, caplog):
    """In a stand-in for uWSGI's module, as its master sees it: hooks chained once, in order."""
    import os
    from types import SimpleNamespace

    from django_simba.servers import uwsgi as integration
    from django_simba.signals import session_opened

    calls: list[str] = []
    api = SimpleNamespace(
        masterpid=os.getpid,
        worker_id=lambda: 0,
        atexit=lambda: calls.append("user atexit"),
        post_fork_hook=lambda: calls.append("user post-fork"),
    )
    monkeypatch.setitem(sys.modules, "uwsgi", api)

    def start_over() -> None:
        calls.append("start over")

    def close() -> None:
        calls.append("close")

    try:
        integration.connect(start_over, close)
        integration.connect(start_over, close)  # ready() may run twice: still one of each
        api.post_fork_hook()
        api.atexit()
        assert calls == ["start over", "user post-fork", "user atexit", "close"]
        with caplog.at_level("WARNING", logger="django_simba"):
            session_opened.send(sender=None, session_id="s1")
        assert "session s1 opened in uWSGI's master" in caplog.text
    finally:
        session_opened.disconnect(dispatch_uid="django_simba.uwsgi_master")
