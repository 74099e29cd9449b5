"""Log noise: a backend outage is told in a few lines, and the operator tools print one clear error.

The engine runs here on the virtual runtime (simulated time, one thread) over
a memory backend that can be switched off, as an idle worker would sit through
an outage: its session, and the candidacy of a leader-mode task.
"""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import Engine, EngineConfig
from django_simba.engine.outage import Outage
from django_simba.spi import BackendUnavailable
from django_simba.testing.runtime import VirtualRuntime
from tests.django.processes import ROOT, child_environ

CLOSED_PORT = 1  # nothing listens on port 1 of the loopback interface


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_is_one_line_down_a_reminder_while_it_lasts_and_one_line_back():
    clock = Clock()
    outage = Outage(clock, "the redis backend", remind_every=60)
    assert outage.succeeded() is None and not outage.down
    first = outage.failed("keep-alive failed: refused")
    assert first is not None and first.startswith("keep-alive failed: refused") and outage.down
    lines = []
    for _ in range(60):
        clock.now += 1
        lines.append(outage.failed("cannot open a session: refused"))
    assert lines[:-1] == [None] * 59
    assert lines[-1] == "still failing after 60 s, 61 failed calls; the last: cannot open a session: refused"
    clock.now += 1.5
    back = outage.succeeded()
    assert back == (
        "the redis backend answers again after 61.5 s "
        "(61 failed calls; the last: cannot open a session: refused)"
    )
    assert outage.succeeded() is None and outage.failures == 0
    clock.now += 1000
    again = outage.failed("again")
    assert again == "again (further failures are counted until the redis backend answers again)"


class SwitchableBackend(MemoryBackend):
    """A memory backend whose every call fails while ``down``, as a server that refuses connections."""

    CALLS = frozenset({"open_session", "keep_alive", "close_session", "acquire", "release", "purge_expired"})
    down = False

    def __getattribute__(self, name: str):
        if name in SwitchableBackend.CALLS and object.__getattribute__(self, "down"):
            raise BackendUnavailable("connection refused")
        return super().__getattribute__(name)


def test_an_idle_worker_logs_one_line_when_the_backend_goes_and_one_when_it_is_back(caplog):
    runtime = VirtualRuntime(seed=3, timeout=1.0)
    backend = SwitchableBackend(timeout=1.0, clock=runtime.now)
    config = EngineConfig(lease_duration=3, renew_interval=1, metadata="idle worker")
    engine = Engine(backend, config, runtime)
    engine.start()
    election = engine.election("reports.nightly")
    runtime.run_until_true(lambda: election.is_leader, 10)
    runtime.advance(2)  # what the election's start queued behind its acquire (a purge) is done
    with caplog.at_level(logging.INFO, logger="django_simba.engine"):
        backend.down = True
        runtime.advance(30)
        backend.down = False
        runtime.run_until_true(lambda: election.is_leader, 10)
        runtime.advance(5)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    down = [line for line in warnings if "further failures are counted" in line]
    back = [line for line in warnings if line.startswith("django-simba: the memory backend answers again")]
    assert len(down) == 1 and "connection refused" in down[0]
    assert len(back) == 1
    failed_calls = int(back[0].split("(")[1].split(" failed call")[0])
    assert failed_calls > 20, back  # all of them counted, none of them logged
    assert len(warnings) == 3, warnings  # and, once, the session passing its local deadline
    assert any("passed its local deadline" in line for line in warnings)
    engine.close()


@pytest.mark.parametrize(
    ("command", "simba"),
    [
        ("simba_status", {"BACKEND": "zookeeper", "OPTIONS": {"hosts": f"127.0.0.1:{CLOSED_PORT}"}}),
    ],
)
def test_a_tool_on_an_unreachable_zookeeper_prints_its_error_and_nothing_else(command, simba):
    simba = {**simba, "LEASE_DURATION": 3, "RENEW_INTERVAL": 1, "TIMEOUT": 1}
    done = subprocess.run(
        [sys.executable, "-m", "django", command],
        env=child_environ("tests.django.process_settings", simba),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.strip().splitlines() == [
        "CommandError: the Simba backend cannot be reached: "
        f"could not connect to ZooKeeper at 127.0.0.1:{CLOSED_PORT} in time"
    ]
