"""One Celery beat for a cluster of hosts: two "hosts" (two beats, each with its own metadata and schedule
file) run beat; the elected one sends the ticks; SIGKILL it and the other sends them within the bound,
never both at once.

What the beats send is read where it goes: the Redis list of the test's own queue, where every task
message carries the sending term in its headers (``simba_lease``, ``simba_token``).
"""

from __future__ import annotations

import json
import signal
import time
import uuid

import pytest
import redis

from django_simba.testing import wait_until
from tests.deploy.conftest import BOOT

pytestmark = pytest.mark.redis

LEASE, RENEW = 3.0, 1.0
#: The tick entry's period (sampleproject settings), and how often the test reads the queue.
PERIOD, POLL = 0.5, 0.05
#: A candidate takes over within a lease, half a renew interval and the jitter (up to a quarter).
BOUND = LEASE + RENEW / 2 + RENEW / 4


class Queue:
    """The messages sent to one Redis list, with when the test first saw each."""

    def __init__(self, url: str, name: str) -> None:
        self.connection = redis.Redis.from_url(url)
        self.name = name
        self.seen: list[tuple[float, str, int]] = []  # (seen at, lease, token), in the order sent

    def read(self) -> list[tuple[float, str, int]]:
        now = time.monotonic()
        raw = self.connection.lrange(self.name, 0, -1)  # kombu pushes on the left: newest first
        for message in reversed(raw[: len(raw) - len(self.seen)]):
            headers = json.loads(message)["headers"]
            self.seen.append((now, headers["simba_lease"], int(headers["simba_token"])))
        return self.seen

    def tokens(self) -> list[int]:
        return [token for _, _, token in self.read()]

    def close(self) -> None:
        self.connection.delete(self.name)
        self.connection.close()


@pytest.fixture
def queue(shared_url):
    found = Queue(shared_url, f"beat-{uuid.uuid4().hex[:8]}")
    yield found
    found.close()


def _leader(backend, election: str) -> str | None:
    info = backend.owner(election)
    return info.metadata if info is not None else None


def beat(start_server, tmp_path, queue: Queue, election: str, host: str):
    schedule = tmp_path / f"schedule-{host}"
    return start_server(
        ["celery", "-A", "deploysite", "beat", "--schedule", str(schedule), "--loglevel", "info"],
        simba={"LEASE_DURATION": LEASE, "RENEW_INTERVAL": RENEW, "METADATA": f"host={host}"},
        extra_env={"DEPLOY_BEAT_QUEUE": queue.name, "DEPLOY_BEAT_ELECTION": election},
    )


def test_one_beat_schedules_and_another_takes_over_within_the_bound_when_it_is_killed(
    start_server, backend, tmp_path, queue
):
    election = f"beat:{uuid.uuid4().hex[:8]}"
    first = beat(start_server, tmp_path, queue, election, "host-a")
    wait_until(lambda: _leader(backend, election) == "host=host-a", BOOT, message="host-a's beat leads")
    second = beat(start_server, tmp_path, queue, election, "host-b")
    second.wait_log("beat: Starting...")
    wait_until(lambda: len(queue.read()) >= 6, BOOT, message="ticks sent")
    # host-b's beat is up and contends (a session of its own), yet sends nothing.
    wait_until(
        lambda: any(s.metadata == "host=host-b" for s in backend.sessions()), BOOT, message="host-b's session"
    )
    contending = len(queue.read())
    wait_until(lambda: len(queue.read()) >= contending + 4, BOOT, message="ticks while both run")
    leading = backend.owner(election)
    assert leading is not None and leading.metadata == "host=host-a"
    assert set(queue.tokens()) == {leading.token}

    killed_at = first.signal(signal.SIGKILL)
    sent_before = len(queue.read())
    taken = wait_until(
        lambda: next((seen for seen, _, token in queue.read()[sent_before:] if token != leading.token), None),
        BOUND + 10,
        interval=POLL,
        message="host-b's beat sending",
    )
    took = taken - killed_at
    wait_until(lambda: len(queue.read()) >= sent_before + 6, BOOT, message="more ticks from host-b")
    now_leading = backend.owner(election)
    assert now_leading is not None and now_leading.metadata == "host=host-b"

    tokens = queue.tokens()
    assert tokens == sorted(tokens), tokens  # never two beats' ticks interleaved
    assert set(tokens) == {leading.token, now_leading.token}
    assert {lease for _, lease, _ in queue.read()} == {election}
    print(f"\nbeat take-over after SIGKILL: {took:.2f} s (bound {BOUND:.2f} s + one period {PERIOD} s)")
    assert took <= BOUND + PERIOD + 2 * POLL, took
    second.signal(signal.SIGTERM)
    assert second.wait_exit() == 0
    assert backend.owner(election) is None  # a graceful stop resigns at once
