"""Which processes take part, as real processes: one-off commands hold no session and never lead, whether
nobody leads or gunicorn does; a candidacy that asks (``serving_only=False``) leads in such a process;
handles made while the application loads read no settings, so a typo in ``SIMBA`` leaves ``manage.py
check`` its report and gunicorn its pages.

The tiny project (``tests/django/tinysite``) starts an election in ``ready()`` (``TINYSITE_ELECTION``)
and imports handles made at module level (``TINYSITE_HANDLES``); its log lines carry the pid.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.testing import wait_until
from tests.django.processes import (
    BOOT,
    ROOT,
    TINYSITE_SETTINGS,
    Output,
    booted_workers,
    child_environ,
    every_worker_logs,
    gunicorn_argv,
    listening_port,
    redis_url_or_skip,
    running,
)

pytestmark = pytest.mark.redis

PID = re.compile(r"\bpid=(\d+)\b")


def session_pids(backend: RedisBackend) -> list[int]:
    return [int(m.group(1)) for s in backend.sessions() if s.remaining > 0 and (m := PID.search(s.metadata))]


def leader_pid(backend: RedisBackend, name: str) -> int | None:
    info = backend.owner(name)
    match = PID.search(info.metadata) if info is not None else None
    return int(match.group(1)) if match else None


@pytest.fixture
def site(tmp_path: Path):
    """The tiny project on the test Redis, with an election in ready() and a SQLite file of its own."""
    url = redis_url_or_skip()
    name = f"tinysite:{uuid.uuid4().hex[:10]}"
    simba = {"BACKEND": "redis", "OPTIONS": {"url": url}, "LEASE_DURATION": 6, "RENEW_INTERVAL": 2}
    database = str(tmp_path / "db.sqlite3")
    environ = child_environ(TINYSITE_SETTINGS, simba, TINYSITE_ELECTION=name, SIMBA_CHILD_SQLITE=database)
    backend = RedisBackend({"url": url}, timeout=5)
    try:
        yield environ, backend, name
    finally:
        backend.close()


def manage(environ: dict[str, str], *args: str, **kwargs) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "django", *args],
        env=environ,
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def finish(process: subprocess.Popen[str], feed: str = "") -> str:
    out, _ = process.communicate(feed, timeout=60)
    assert process.returncode == 0, out
    return out


@dataclass
class Lingering:
    """A one-off command that is done but has not exited yet: what its election in ``ready()`` did."""

    pid: int
    held: bool
    leads: bool
    output: Output


@contextmanager
def lingering(environ: dict[str, str], tmp_path: Path, *args: str, feed: str = "") -> Iterator[Lingering]:
    """Run a management command of the tiny project and keep its process alive once the command is done.

    ``feed`` is its input (a new session: no terminal, so prompts read it too). Inside the block the
    process lives with whatever it opened; on the way out it is let go and must exit with 0.
    """
    release = tmp_path / f"release-{uuid.uuid4().hex[:8]}"
    process = manage({**environ, "TINYSITE_LINGER": str(release)}, *args, start_new_session=True)
    assert process.stdin is not None and process.stdout is not None
    output = Output(process.stdout)
    process.stdin.write(feed)
    process.stdin.close()
    try:
        said = wait_until(lambda: output.matches(LINGERS), BOOT, message=f"{args[0]} is done and lingers")
        pid, held, leads = said[0].groups()
        assert int(pid) == process.pid, output.text()
        yield Lingering(process.pid, held == "True", leads == "True", output)
    finally:
        release.touch()
        try:
            process.wait(60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, output.text()


LINGERS = r"TINYSITE LINGERS pid=(\d+) held=(\w+) leads=(\w+)"
PASSWORD = "s3cret-Passw0rd"
ONE_OFF_COMMANDS = [
    (("help",), ""),
    (("shell", "-c", "print('in the shell')"), ""),
    (("migrate", "--noinput"), ""),
    (("createsuperuser", "--noinput", "--username", "admin", "--email", "admin@example.com"), ""),
    (("changepassword", "admin"), f"{PASSWORD}\n{PASSWORD}\n"),  # read at its prompts
]


@pytest.mark.parametrize("gunicorn", [False, True], ids=["while-nobody-leads", "while-gunicorn-leads"])
def test_one_off_commands_hold_no_session_and_never_lead(site, tmp_path, gunicorn):
    """The original bug: ``manage.py shell`` won the election started in ``ready()`` while nobody led.

    Each command is looked at once it is done, still alive: the backend lists no session of its
    pid, and the election has no leader (or still a gunicorn worker).
    """
    environ, backend, name = site
    finish(manage(environ, "migrate", "--noinput"))  # the SQLite file the other commands use
    with running(gunicorn_argv(), environ) if gunicorn else nullcontext() as server:
        workers: set[int | None] = {None}
        if server is not None:
            workers = set(booted_workers(server[1]))
            wait_until(lambda: leader_pid(backend, name) in workers, BOOT, message="a worker leads")
        for args, feed in ONE_OFF_COMMANDS:
            with lingering(environ, tmp_path, *args, feed=feed) as seen:
                assert seen.held and not seen.leads, (args, seen.output.text())
                assert seen.pid not in session_pids(backend), args
                assert leader_pid(backend, name) in workers, args
                assert (backend.owner(name) is None) is (not gunicorn), args
            if args[0] == "changepassword":
                assert "Password changed successfully" in seen.output.text()
        assert leader_pid(backend, name) in workers


def test_in_a_process_that_does_not_serve_only_a_candidacy_that_asks_leads(site, tmp_path):
    """``serving_only=False`` (``election`` and ``aelection``) contends in ``manage.py shell``; the default
    never leads there, nor does a leader-mode ``@singleton_task``, which is skipped with the reason."""
    environ, backend, name = site
    code = "from tests.django.tinysite.scheduler.nonserving import report; report()"
    with lingering({**environ, "TINYSITE_NAME": name}, tmp_path, "shell", "-c", code) as seen:
        said = wait_until(lambda: seen.output.matches("NONSERVING (.*)"), BOOT, message="the report")
        found = json.loads(said[0].group(1))
        assert found["serving"] is False
        assert found["held"] == [True, True, False] and found["aheld"] == [True, True, False]
        assert found["asked"] == [False, True] and found["aasked"] == [False, True, True]
        skipped, reason = found["task"]
        assert skipped is False and "does not serve" in reason, reason
        assert "leader-mode tasks run in serving processes only" in reason
        assert found["held_after"] is False and seen.held and not seen.leads
        # As the backend sees it: the shell leads what asked, and nothing else.
        assert leader_pid(backend, f"{name}:asked") == seen.pid == leader_pid(backend, f"{name}:aasked")
        for other in (name, f"{name}:held", f"{name}:aheld", f"{name}:task"):
            assert backend.owner(other) is None, other
        assert seen.pid in session_pids(backend)  # the session of the candidacies that asked


TYPO = {"BACKEND": "memory", "LEASE_DURATON": 5}


@pytest.mark.parametrize("made", ["module-level handles", "an election in ready()"])
def test_handles_made_while_loading_leave_check_its_report_and_gunicorn_its_pages(tmp_path, made):
    handles = made == "module-level handles"
    what = {"TINYSITE_HANDLES": "1"} if handles else {"TINYSITE_ELECTION": "tinysite:typo"}
    environ = child_environ(TINYSITE_SETTINGS, TYPO, SIMBA_CHILD_SQLITE=str(tmp_path / "db.sqlite3"), **what)
    check = [sys.executable, "-m", "django", "check"]
    done = subprocess.run(check, env=environ, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "SystemCheckError" in done.stderr and "django_simba.E002" in done.stderr
    assert "LEASE_DURATON" in done.stderr and "Traceback" not in done.stderr, done.stderr

    with running(gunicorn_argv(), environ) as (_, output):
        port = listening_port(output)
        workers = booted_workers(output)
        reported = r"pid=(\d+) ERROR django_simba .*E002.*LEASE_DURATON"
        every_worker_logs(output, workers, reported, "E002")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/plain/", timeout=10) as response:
            assert response.read() == b"plain"
        assert "Worker failed to boot" not in output.text()
        assert not output.matches("Traceback"), output.text()


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True, databases=["default", "postgresql"])
def test_db_worker_under_the_autoreloader_serves_in_its_child_only():
    """The autoreloader's parent of ``db_worker`` opened a session of its own; its child is the worker."""
    pytest.importorskip("django_tasks_db")
    from django.db import connections

    url = redis_url_or_skip()
    simba = {"BACKEND": "redis", "OPTIONS": {"url": url}, "LEASE_DURATION": 6, "RENEW_INTERVAL": 2}
    database = connections["postgresql"].settings_dict["NAME"]
    environ = child_environ("tests.django.taskworker_settings", simba, SIMBA_CHILD_DB_NAME=database)
    finish(manage(environ, "migrate", "django_tasks_database", "--noinput"))
    backend = RedisBackend({"url": url}, timeout=5)
    options = ["--reload", "--interval", "0.2", "--no-startup-delay"]
    worker = [sys.executable, "-m", "django", "db_worker", *options]
    try:
        with running(worker, environ) as (parent, _):
            child = wait_until(
                lambda: next((pid for pid in session_pids(backend) if _parent_of(pid) == parent.pid), None),
                BOOT,
                message="the autoreloader's child opened its session",
            )
            assert parent.pid not in session_pids(backend) and child != parent.pid
    finally:
        backend.close()


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])
