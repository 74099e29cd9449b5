"""Real servers serving the sample project in ``sampleproject/``, watched through the Redis backend.

Every server runs in a process group of its own, with its output in a log file that a
failing test shows. What the tests look at is what the backend holds: the live sessions
(each names its process in its metadata, ``pid=...``) and who holds the sample app's
election. The candidate "elsewhere" is an engine in the test process itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.engine import Election, Engine, EngineConfig
from django_simba.testing import wait_until
from tests.backends.redis import conftest as redis_fixtures

# The Redis tests' fixtures: the shared server (SIMBA_REDIS_URL), checked once per run, and a backend on it.
shared_url = redis_fixtures.shared_url
shared_backend = redis_fixtures.shared_backend

SITE = Path(__file__).parent / "sampleproject"
BIN = Path(sys.executable).parent
#: The sample project's timings (sampleproject/deploysite/settings.py): an expiry would take this long.
LEASE = 10.0
RENEW = 2.0
#: How long a server may take to boot or to stop on this 2-core machine, loaded by other suites.
BOOT = 30.0
STOP = 15.0

#: Take-over times measured after graceful stops, printed at the end of the run.
TAKE_OVERS: list[tuple[str, float]] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TAKE_OVERS:
        terminalreporter.section("take-over after a graceful stop (signal sent -> candidate elected)")
        for what, seconds in TAKE_OVERS:
            terminalreporter.write_line(f"{what:<54} {seconds * 1000:8.1f} ms")


@pytest.fixture
def backend(shared_backend: RedisBackend) -> RedisBackend:
    """The shared Redis server (``SIMBA_REDIS_URL``), where the servers and the candidate meet."""
    return shared_backend


@pytest.fixture
def election_name() -> str:
    return f"deploy:{uuid.uuid4().hex[:12]}"


@dataclass
class Server:
    """A server process we started (the leader of its own process group), or one it daemonized into."""

    pid: int
    log: Path
    process: subprocess.Popen[bytes] | None = None
    adopted: list[Server] = field(default_factory=list)

    def tree(self) -> set[int]:
        """This process and all its descendants, now."""
        children: dict[int, list[int]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        found, todo = set(), [self.pid]
        while todo:
            pid = todo.pop()
            if pid not in found:
                found.add(pid)
                todo.extend(children.get(pid, []))
        return found

    def children(self) -> set[int]:
        return self.tree() - {self.pid}

    def alive(self) -> bool:
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"

    def adopt(self, pid: int) -> Server:
        """The daemon this server became (gunicorn --daemon): watched and stopped like the server."""
        adopted = Server(pid, self.log)
        self.adopted.append(adopted)
        return adopted

    def signal(self, signum: int) -> float:
        """Send ``signum`` to the server process; when it was sent (monotonic clock)."""
        sent = time.monotonic()
        os.kill(self.pid, signum)
        return sent

    def kill_child(self, pid: int) -> None:
        """SIGKILL one of the server's own children (nothing else: it must be in the tree)."""
        assert pid in self.children(), f"{pid} is not a child of the server"
        os.kill(pid, signal.SIGKILL)

    def wait_exit(self, timeout: float = STOP) -> int:
        assert self.process is not None, "only a process started here has an exit status"
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the server did not stop within {timeout} s\n{self.output()}") from None

    def wait_log(self, text: str, timeout: float = BOOT) -> None:
        wait_until(lambda: text in self.output(), timeout, interval=0.05, message=f"{text!r} in the log")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        """Whatever is left of what we started goes, by pid: the process, its group, its daemons' trees."""
        for adopted in self.adopted:
            for pid in adopted.tree():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            self.process.wait(STOP)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)  # children the server left behind


@pytest.fixture
def start_server(
    tmp_path: Path, shared_url: str, election_name: str, request: pytest.FixtureRequest
) -> Iterator[object]:
    started: list[Server] = []

    def start(
        argv: Sequence[str],
        *,
        simba: dict[str, object] | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> Server:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "deploysite.settings",
            "SIMBA_REDIS_URL": shared_url,
            "DEPLOY_ELECTION": election_name,
            "DEPLOY_SIMBA": json.dumps(simba or {}),
            "PYTHONPATH": str(SITE),
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
        env.pop("PYTEST_CURRENT_TEST", None)
        log = tmp_path / f"server-{len(started)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(BIN / argv[0]) if (BIN / argv[0]).exists() else argv[0], *argv[1:]],
                cwd=SITE,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        server = Server(process.pid, log, process)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
    if request.node.rep_call.failed if hasattr(request.node, "rep_call") else False:
        for server in started:
            print(f"--- {server.log.name}\n{server.output()[-6000:]}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[object]:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report


PID = re.compile(r"\bpid=(\d+)\b")


def pid_of(metadata: str) -> int | None:
    match = PID.search(metadata)
    return int(match.group(1)) if match else None


def live_sessions(backend: RedisBackend, pids: set[int]) -> list[int]:
    """The pids among ``pids`` that have a live session, one entry per session."""
    found = []
    for session in backend.sessions():
        pid = pid_of(session.metadata)
        if session.remaining > 0 and pid in pids:
            found.append(pid)
    return found


def workers_up(
    server: Server, backend: RedisBackend, *, count: int = 2, not_among: frozenset[int] = frozenset()
) -> set[int]:
    """Wait until ``count`` new children of the server run, each with a live session; their pids."""

    def ready() -> set[int] | None:
        workers = server.children() - not_among
        up = len(workers) == count and len(live_sessions(backend, workers)) == count
        return workers if up else None

    return wait_until(ready, BOOT, interval=0.05, message=f"{count} workers with a session each")


def leader_pid(backend: RedisBackend, name: str) -> int | None:
    info = backend.owner(name)
    return pid_of(info.metadata) if info is not None else None


def wait_for_leader(
    backend: RedisBackend, name: str, among: set[int] | None = None, timeout: float = BOOT
) -> int:
    def found() -> int | None:
        pid = leader_pid(backend, name)
        return pid if pid is not None and (among is None or pid in among) else None

    return wait_until(found, timeout, interval=0.05, message=f"a leader of {name!r}")


@dataclass
class Candidate:
    """An election elsewhere (in the test process), on the same backend, waiting to take over."""

    engine: Engine
    election: Election
    elected_at: list[float] = field(default_factory=list)

    def wait_elected(self, timeout: float) -> float:
        wait_until(lambda: self.elected_at, timeout, interval=0.005, message="the candidate elected")
        return self.elected_at[0]


@pytest.fixture
def candidate(shared_url: str, election_name: str) -> Iterator[object]:
    made: list[Candidate] = []

    def make() -> Candidate:
        engine = Engine(
            RedisBackend({"url": shared_url}, timeout=5),
            EngineConfig(lease_duration=LEASE, renew_interval=RENEW, metadata=f"candidate pid={os.getpid()}"),
        )
        elected_at: list[float] = []
        election = engine.election(election_name, on_elected=lambda term: elected_at.append(time.monotonic()))
        assert election.wait_decided(BOOT), "the candidate's first attempt was not answered"
        assert not election.is_leader, "the candidate must wait behind the server's leader"
        found = Candidate(engine, election, elected_at)
        made.append(found)
        return found

    yield make
    for found in made:
        found.engine.close()


def record_take_over(what: str, sent: float, elected: float) -> float:
    seconds = elected - sent
    TAKE_OVERS.append((what, seconds))
    return seconds
