"""simba_status, simba_purge and simba_run against the database backend on the test database.

The in-process tests use the test database through Django's connections; the
child-process tests (exit codes, signals) open the same database file or server.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings

from django_simba import registry
from django_simba.testing import wait_until
from tests.django.engines import reset_engine

pytestmark = pytest.mark.django_db(transaction=True)

SIMBA = {"BACKEND": "database", "LEASE_DURATION": 3, "RENEW_INTERVAL": 1, "METADATA": "commands-tests"}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def database_backend():
    with override_settings(SIMBA=SIMBA):
        yield
        reset_engine()


@pytest.fixture
def backend():
    """The engine's backend: the commands read through it, and the tests set the scene with it."""
    return registry.get_engine().backend


def run_command(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def expired_session(backend, metadata: str) -> str:
    """A session that nobody keeps alive, already past its lease."""
    session_id = backend.open_session(0.05, metadata).session_id
    wait_until(
        lambda: any(s.session_id == session_id and s.remaining <= 0 for s in backend.sessions()),
        5,
        message="the session expired",
    )
    return session_id


def child(*args: str, simba: dict | None = None, env: dict | None = None, **popen) -> subprocess.Popen:
    """``python -m django ARGS`` on the test database, with ``simba`` as its SIMBA setting."""
    environ = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.django.process_settings",
        "PYTHONPATH": str(ROOT),
        "SIMBA_CHILD_DB_NAME": connection.settings_dict["NAME"],
        "SIMBA_CHILD_SIMBA": json.dumps(simba or SIMBA),
        **(env or {}),
    }
    environ.pop("PYTEST_CURRENT_TEST", None)
    popen = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **popen}
    argv = [sys.executable, "-m", "django", *args]
    return subprocess.Popen(argv, env=environ, cwd=ROOT, text=True, **popen)


# -- simba_status ---------------------------------------------------------------------------


def test_status_table_shows_sessions_leases_and_groups(backend):
    engine = registry.get_engine()
    with engine.lock("invoices:42", timeout=5) as term:
        group = engine.group("workers")
        group.join()
        crashed = expired_session(backend, "host=gone pid=1")
        text = run_command("simba_status")
        group.leave()
    lines = text.splitlines()
    assert lines[0].startswith("Simba status: database (") and "backend" in lines[0]
    lease_line = next(line for line in lines if line.strip().startswith("invoices:42"))
    assert str(term.token) in lease_line.split() and engine.session_id in lease_line
    assert "commands-tests" in lease_line
    crashed_line = next(line for line in lines if crashed in line)
    assert "expired" in crashed_line and "host=gone pid=1" in crashed_line
    own_line = next(line for line in lines if line.strip().startswith(engine.session_id))
    assert " s " in own_line and "workers" in own_line
    assert any(line.strip().startswith("workers") and engine.session_id in line for line in lines)


def test_status_json_and_prefix(backend):
    engine = registry.get_engine()
    with engine.lock("invoices:1", timeout=5), engine.lock("reports:daily", timeout=5) as term:
        data = json.loads(run_command("simba_status", "--json", "--prefix", "reports:"))
    assert [lease["name"] for lease in data["leases"]] == ["reports:daily"]
    lease = data["leases"][0]
    assert lease["token"] == term.token and lease["session_id"] == engine.session_id
    assert 0 < lease["remaining"] <= 3
    session = next(s for s in data["sessions"] if s["session_id"] == engine.session_id)
    assert session["expired"] is False and session["leases"] == ["reports:daily"]
    assert data["backend"] == {"name": "database", "vendor": connection.vendor}  # fields, not a label


def test_status_watch_refreshes(backend):
    text = run_command("simba_status", "--watch", "--count", "3", "--interval", "0.05", "--json")
    reports = [json.loads(line) for line in text.splitlines()]
    assert len(reports) == 3 and all("sessions" in r for r in reports)


def test_status_rejects_an_invalid_prefix():
    with pytest.raises(CommandError, match="invalid name") as caught:
        run_command("simba_status", "--prefix", "bad name")
    assert caught.value.returncode == 1


@pytest.mark.postgresql  # its driver: the server itself is made unreachable
def test_status_exits_2_with_the_reason_when_the_backend_is_unreachable():
    process = child(
        "simba_status",
        simba={"BACKEND": "database", "OPTIONS": {"alias": "postgresql"}, "TIMEOUT": 2},
        env={"SIMBA_PG_PORT": "1"},  # nothing listens there
    )
    out, err = process.communicate(timeout=30)
    assert process.returncode == 2, (out, err)
    assert "cannot be reached" in err and "postgresql" in err


#: The PostgreSQL alias of tests/settings.py on a port nothing listens on (``SIMBA_PG_PORT=1``):
#: a test using it needs the driver, so it is marked ``postgresql``.
UNREACHABLE_PG = {"simba": {"BACKEND": "database", "OPTIONS": {"alias": "postgresql"}, "TIMEOUT": 2}}


@pytest.mark.postgresql  # its driver and alias: the server itself is made unreachable
def test_status_json_prints_json_when_the_backend_is_unreachable():
    process = child("simba_status", "--json", **UNREACHABLE_PG, env={"SIMBA_PG_PORT": "1"})
    out, err = process.communicate(timeout=30)
    assert process.returncode == 2, (out, err)
    document = json.loads(out)
    assert document["exit_code"] == 2 and "cannot be reached" in document["error"]
    assert "cannot be reached" in err  # and the reason on stderr, as without --json


@pytest.mark.parametrize(
    "args",
    [("--interval", "0"), ("--count", "-1"), ("--prefix", "bad name"), ("--watch", "--prefix", "bad name")],
)
def test_status_json_prints_json_for_every_refused_argument_too(args):
    """docs/commands.rst: when the report cannot be made, stdout still gets one JSON document."""
    process = child("simba_status", "--json", *args)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, (out, err)
    document = json.loads(out)
    assert document["exit_code"] == 1 and document["error"] in err


@pytest.mark.parametrize(
    "args",
    [
        ("simba_status", "--bogus"),
        ("simba_run", "--", "true"),  # neither --lock nor --leader
        ("simba_purge", "--limit", "many"),
        ("simba_run", "--lock", "x", "--timeout", "soon", "--", "true"),
    ],
)
def test_a_usage_error_exits_1_not_the_2_of_an_unreachable_backend(args):
    process = child(*args)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, (args, out, err)
    assert "usage:" in err and "error:" in err


@pytest.mark.parametrize("watch", [False, True])
def test_status_into_a_pipe_closed_early_ends_quietly(backend, watch):
    """``simba_status | head`` ended in a BrokenPipeError traceback."""
    for index in range(1500):  # more output than a pipe holds (64 KiB), so a write meets the closed pipe
        backend.open_session(30, f"host=filler-{index} pid={index}")
    read, write = os.pipe()
    args = ["--watch", "--count", "5", "--interval", "0.05"] if watch else []
    process = child("simba_status", *args, stdout=write)
    os.close(write)
    with os.fdopen(read) as reader:
        reader.readline()  # what `head -1` reads, before it leaves
    _, err = process.communicate(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    # 141 (128 + SIGPIPE) once a write met the closed pipe; a single report the kernel took
    # in part before the reader left never hears of it, and ends as it would have (0)
    assert process.returncode == (141 if watch else process.returncode) and process.returncode in (0, 141)


@pytest.mark.postgresql  # its driver: the "server" is a port that never answers
@pytest.mark.parametrize("command", ["simba_status", "simba_purge", "simba_tokens"])
def test_ctrl_c_while_the_backend_does_not_answer_exits_130_without_a_traceback(command):
    from tests.servers.ports import SilentServer

    simba = {"BACKEND": "database", "OPTIONS": {"alias": "postgresql"}, "TIMEOUT": 60}
    with SilentServer() as server:
        process = child(command, simba=simba, env={"SIMBA_PG_PORT": str(server.port)})
        try:
            assert server.accepted.wait(60), "the command connected"
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=30)  # not after the 60 s of TIMEOUT
        finally:
            process.kill()
    assert process.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


def test_ctrl_c_ends_a_status_watch_with_the_code_of_its_last_refresh(backend):
    process = child("simba_status", "--watch", "--json", "--interval", "0.2")
    try:
        assert process.stdout is not None
        assert "sessions" in json.loads(process.stdout.readline())  # a refresh that worked
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 0, (out, err)
    assert "Traceback" not in err, err


# -- simba_purge ----------------------------------------------------------------------------


def test_purge_removes_expired_sessions_only(backend):
    live = backend.open_session(30, "live").session_id
    crashed = [expired_session(backend, f"crashed {i}") for i in range(3)]
    assert "Purged 2 expired sessions." in run_command("simba_purge", "--limit", "2", "--once")
    assert "Purged 1 expired session." in run_command("simba_purge")
    remaining = {s.session_id for s in backend.sessions()}
    assert live in remaining and not remaining & set(crashed)
    backend.close_session(live)


# -- simba_run --------------------------------------------------------------------------------


def test_run_passes_the_exit_code_and_the_token(tmp_path, backend):
    token_file = tmp_path / "token"
    with pytest.raises(CommandError) as caught:
        run_command(
            "simba_run", "--lock", "cron:job", "--shell", "--", f"echo $SIMBA_TOKEN > {token_file}; exit 7"
        )
    assert caught.value.returncode == 7
    token = int(token_file.read_text())
    assert token > 0
    assert backend.owner("cron:job") is None  # released at exit
    run_command("simba_run", "--lock", "cron:job", "--", "true")
    assert backend.leases("cron:")[:1] == []


def test_run_skips_while_another_instance_holds_the_lock(tmp_path, backend):
    other = backend.open_session(30, "host=other pid=2").session_id
    backend.acquire(other, "cron:busy")
    marker = tmp_path / "ran"
    out = run_command("simba_run", "--lock", "cron:busy", "--", "touch", str(marker))
    assert "skipped" in out and "host=other pid=2" in out
    with pytest.raises(CommandError) as caught:
        run_command("simba_run", "--lock", "cron:busy", "--skip-code", "5", "--", "touch", str(marker))
    assert caught.value.returncode == 5
    assert not marker.exists()
    backend.close_session(other)


def test_run_as_leader(tmp_path, backend):
    marker = tmp_path / "token"
    run_command("simba_run", "--leader", "cron:leader", "--shell", "--", f"echo $SIMBA_LEASE > {marker}")
    assert marker.read_text().strip() == "cron:leader"
    assert backend.owner("cron:leader") is None


def test_run_stops_the_command_when_the_lock_is_lost(tmp_path, backend):
    started = tmp_path / "started"
    script = f"touch {started}; while :; do sleep 0.05; done"
    results = []

    def force_release_once_running():
        wait_until(started.exists, 10, message="the command started")
        assert backend.force_release("cron:lost")

    import threading

    releaser = threading.Thread(target=lambda: results.append(force_release_once_running()))
    releaser.start()
    with pytest.raises(CommandError) as caught:
        run_command("simba_run", "--lock", "cron:lost", "--kill-after", "2", "--shell", "--", script)
    releaser.join(10)
    assert caught.value.returncode == 3
    assert "ended (taken)" in str(caught.value)


def test_run_reports_a_missing_command():
    with pytest.raises(CommandError) as caught:
        run_command("simba_run", "--lock", "cron:x", "--", "/nonexistent/command")
    assert caught.value.returncode == 127


def test_run_forwards_sigterm_and_releases_at_once(tmp_path, backend):
    ready, got = tmp_path / "ready", tmp_path / "got-term"
    script = f"trap 'touch {got}; exit 42' TERM; touch {ready}; while :; do sleep 0.05; done"
    # A long lease: the lock can only be free right after the exit if simba_run released it.
    simba = {**SIMBA, "LEASE_DURATION": 30, "RENEW_INTERVAL": 5}
    process = child("simba_run", "--lock", "cron:term", "--shell", "--", script, simba=simba)
    try:
        wait_until(ready.exists, 20, message="the command started")
        holder = backend.owner("cron:term")
        assert holder is not None and holder.remaining > 20
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    finally:
        process.kill()
    assert got.exists(), (out, err)
    assert process.returncode == 42, (out, err)
    assert backend.owner("cron:term") is None


def test_run_a_management_command_of_the_project(tmp_path, backend):
    # ``python -m django shell -c ...``: this process was not started through a manage.py.
    marker = tmp_path / "lease"
    code = f"import os, pathlib; pathlib.Path({str(marker)!r}).write_text(os.environ['SIMBA_LEASE'])"
    run_command("simba_run", "--lock", "cron:shell", "--manage", "--", "shell", "-c", code)
    assert marker.read_text() == "cron:shell"
    assert backend.owner("cron:shell") is None


def test_a_signal_arriving_while_the_handlers_change_meets_the_new_ones():
    # simba_run sets its handlers one signal after another: a Ctrl+C between SIGTERM's and SIGINT's
    # raised KeyboardInterrupt from Python's default handler instead of stopping the wait cleanly.
    from django_simba.operations.runner import _signals_held

    # The hold is this thread's signal mask. simba_run changes its handlers while it has no other
    # thread, where the kernel can only give it the process's signals here; this test process has
    # threads left by other tests, and a signal sent to the process went to one of them, whose
    # handler then ran here before the change (['old']). So the signal is sent to this thread.
    seen: list[str] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: seen.append("old"))
    try:
        with _signals_held():
            signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
            signal.signal(signal.SIGUSR1, lambda signum, frame: seen.append("new"))
        wait_until(lambda: seen, 5, message="the held signal delivered")
        assert seen == ["new"]
    finally:
        signal.signal(signal.SIGUSR1, previous)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_ends_the_wait_for_the_lock_at_once(backend, signum):
    other = backend.open_session(60, "host=other pid=3").session_id
    assert backend.acquire(other, "cron:wait") is not None
    simba = {**SIMBA, "METADATA": "waiting-child"}
    process = child("simba_run", "--lock", "cron:wait", "--timeout", "300", "--", "true", simba=simba)
    try:
        # Its handlers are installed just before the wait begins (before, a signal kills it as any process).
        wait_until(lambda: _catches(process.pid, signal.SIGTERM), 30, message="simba_run catches SIGTERM")
        wait_until(
            lambda: any(s.metadata == "waiting-child" for s in backend.sessions()),
            30,
            message="simba_run opened its session",
        )
        process.send_signal(signum)
        out, err = process.communicate(timeout=20)  # not after the 300 s of --timeout
    finally:
        process.kill()
    assert process.returncode == 128 + signum, (out, err)
    assert f"stopped by {signal.Signals(signum).name} while waiting for 'cron:wait'" in err
    left = [s for s in backend.sessions() if s.metadata == "waiting-child"]
    assert not left, (left, err)  # closed on the way out (err says why a close failed)
    assert backend.owner("cron:wait").session_id == other
    backend.close_session(other)


@pytest.mark.redis
def test_run_stops_the_command_before_its_term_can_end_when_renewals_fail(tmp_path):
    """The command is warned while the term is valid and is gone before the lease expires on Redis."""
    from urllib.parse import urlsplit

    from django_simba.backends.redis import RedisBackend
    from tests.backends.database.proxy import FreezableProxy
    from tests.django.processes import forget_redis_keys, redis_url_or_skip

    redis_url = urlsplit(redis_url_or_skip())
    proxy = FreezableProxy(redis_url.hostname or "127.0.0.1", redis_url.port or 6379)
    direct = RedisBackend({"url": redis_url.geturl()}, timeout=2)
    name = f"cron:renewals-{os.getpid()}"
    script = (
        "import os, pathlib, signal, time\n"
        f"here = pathlib.Path({str(tmp_path)!r})\n"
        "signal.signal(signal.SIGTERM, lambda *_: (here / 'term').write_text(repr(time.monotonic())))\n"
        "(here / 'pid').write_text(str(os.getpid()))\n"
        "while True:\n"
        "    time.sleep(0.02)\n"  # ignores SIGTERM: only SIGKILL ends it
    )
    simba = {
        "BACKEND": "redis",
        "OPTIONS": {"url": f"redis://127.0.0.1:{proxy.port}{redis_url.path}"},
        "LEASE_DURATION": 6,
        "RENEW_INTERVAL": 1,
        "TIMEOUT": 1,
        "DRIFT": 0.05,
    }
    argv = ["simba_run", "--lock", name, "--kill-after", "2", "--", sys.executable, "-c", script]
    process = child(*argv, simba=simba)
    try:
        pid = int(wait_until(lambda: _written(tmp_path / "pid"), 30, message="the command started"))
        holder = direct.owner(name)
        assert holder is not None
        proxy.freeze()  # renewals go nowhere from now on

        def lease_expires_at() -> float:
            info = direct.owner(name)
            assert info is not None and info.session_id == holder.session_id, "the term is still valid"
            return time.monotonic() + info.remaining

        expires_at = lease_expires_at()
        warned_at = float(
            wait_until(lambda: _written(tmp_path / "term"), 20, message="the command got SIGTERM")
        )
        expires_at = max(expires_at, lease_expires_at())  # still held on Redis when SIGTERM came
        wait_until(lambda: _gone(pid), 20, interval=0.005, message="the command is gone")
        gone_at = time.monotonic()
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
        proxy.close()
        direct.close()
        forget_redis_keys(redis_url.geturl(), f"*{name}*")
    assert warned_at < gone_at < expires_at, (warned_at, gone_at, expires_at)
    assert process.returncode == 3, (out, err)
    assert "renewals" in err


def _written(path: Path) -> str:
    """The file's text, empty until it exists (``write_text`` creates the file, then writes)."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def _gone(pid: int) -> bool:
    """The process has exited (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _catches(pid: int, signum: int) -> bool:
    """The process has a handler of its own for ``signum`` (the SigCgt mask of /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False
