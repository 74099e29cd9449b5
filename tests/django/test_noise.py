"""Log noise: a backend outage is told in a few lines, and the operator tools print one clear error.

The engine runs here on the virtual runtime (simulated time, one thread) over
a memory backend that can be switched off, as an idle worker would sit through
an outage: its session, and the candidacy of a leader-mode task.
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import Engine, EngineConfig
from django_simba.engine.outage import Outage
from django_simba.spi import BackendUnavailable
from django_simba.spi.outage import ConnectionOutage
from django_simba.testing.runtime import VirtualRuntime
from tests.clocks import Clock
from tests.django.processes import ROOT, child_environ
from tests.outages import sit_through_an_outage, told_once_each

CLOSED_PORT = 1  # nothing listens on port 1 of the loopback interface


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
    assert lines[-1] == (
        "the redis backend still fails after 60 s, 61 failed calls; the last: cannot open a session: refused"
    )
    clock.now += 1.5
    back = outage.succeeded()
    assert back == (
        "the redis backend answers again after 62 s "
        "(61 failed calls; the last: cannot open a session: refused)"
    )
    assert outage.succeeded() is None and outage.failures == 0
    clock.now += 1000
    again = outage.failed("again")
    assert again == "again (further failures are counted until the redis backend answers again)"


def test_a_call_sent_during_an_outage_that_fails_after_its_end_opens_no_new_one():
    """It said "answers again after 0.0 s (1 failed call)" right after the real outage's line."""
    clock = Clock()
    outage = Outage(clock, "the redis backend", stragglers_for=5)
    outage.failed("keep-alive failed: refused")
    clock.now += 16
    assert outage.succeeded().startswith("the redis backend answers again after 16 s (1 failed call")
    clock.now += 0.2
    assert outage.failed("acquire of 'x' failed: refused") is None  # sent while it was down
    assert not outage.down and outage.succeeded() is None
    clock.now += 5
    assert outage.failed("keep-alive failed: refused") is not None  # a new outage, later
    clock.now += 0.25
    assert outage.succeeded() == (
        "the redis backend answers again after 250 ms (1 failed call; the last: keep-alive failed: refused)"
    )


def test_a_listening_connection_that_stays_down_is_recalled_every_five_minutes(caplog):
    """The Redis pub/sub and PostgreSQL LISTEN connections: the first failed attempt, a reminder every
    five minutes, the first success; every other attempt at DEBUG."""
    clock = Clock()
    logger = logging.getLogger("django_simba.backends.redis")
    outage = ConnectionOutage(logger, "the Redis pub/sub connection", clock=clock)
    with caplog.at_level(logging.DEBUG, logger=logger.name):
        for _ in range(400):  # 800 s of attempts every 2 s (the subscriber's longest backoff)
            outage.failed("Redis pub/sub connection failed (refused)")
            clock.now += 2
        outage.succeeded()
        outage.succeeded()  # nothing more to tell
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "django-simba: Redis pub/sub connection failed (refused) "
        "(further failures are counted until the Redis pub/sub connection answers again)",
        "django-simba: the Redis pub/sub connection still fails after 300 s, 151 failed attempts; "
        "the last: Redis pub/sub connection failed (refused)",
        "django-simba: the Redis pub/sub connection still fails after 600 s, 301 failed attempts; "
        "the last: Redis pub/sub connection failed (refused)",
        "django-simba: the Redis pub/sub connection answers again after 13 min 20 s "
        "(400 failed attempts; the last: Redis pub/sub connection failed (refused))",
    ]
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 400 - 3


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
    # and, once each, the session passing its local deadline and the leader hearing of its loss
    assert len(warnings) == 4, warnings
    assert any("passed its local deadline" in line for line in warnings)
    assert any("election 'reports.nightly' lost its term, token 1" in line for line in warnings)
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


@pytest.mark.redis
def test_a_16_s_redis_outage_is_told_in_the_promised_lines(own_redis, caplog):
    """docs/observability.rst: an outage is logged once, and once more with a count when it answers
    again; so for the engine's calls, and so for the pub/sub connection's reconnection attempts. Right
    after recovery, no second outage of a call that failed late ("answers again after 0.0 s (1 failed
    call)")."""
    from django_simba.backends.redis import RedisBackend

    records = sit_through_an_outage(
        own_redis,
        lambda: RedisBackend({"url": own_redis.url}, timeout=1),
        EngineConfig(lease_duration=3, renew_interval=1, metadata="noise"),
        caplog,
        # the restarted server lost the other's lease: the election wins, after the hold-back
        lambda engine, election: election.is_leader,
    )
    attempts = [r for r in records if r.levelno == logging.DEBUG and "pub/sub connection" in r.getMessage()]
    assert len(attempts) >= 5, attempts  # reconnection attempts failed all along (a backoff of 2 s at most)
    told = told_once_each(records, WARNINGS)
    failed_calls = re.search(r"answers again after \S+ s \((\d+) failed calls", told["engine back"])
    assert failed_calls is not None and int(failed_calls[1]) > 10, told["engine back"]
    failed_attempts = re.search(r"answers again after \S+ s \((\d+) failed attempts", told["pub/sub back"])
    assert failed_attempts is not None and int(failed_attempts[1]) >= len(attempts), told["pub/sub back"]


#: Every WARNING a 16 s outage of a Redis that loses its data is worth, each once.
WARNINGS = {
    "engine down": r"failed: .* \(further failures are counted until the redis backend answers again\)$",
    "engine back": r"^django-simba: the redis backend answers again after 1\d s \(",
    "pub/sub down": r"^django-simba: Redis pub/sub connection (lost|failed) \(.*\); the engine polls "
    r"meanwhile \(further failures are counted until the Redis pub/sub connection answers again\)$",
    "pub/sub back": r"^django-simba: the Redis pub/sub connection answers again after 1\d s \(",
    "session lost": r"^django-simba: session \w+ passed its local deadline$",
    "data lost": r"has lost the terms it granted before, or is new",
}
