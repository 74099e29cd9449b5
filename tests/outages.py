"""An engine sitting through a backend outage, for the tests that count what it logs (issue 23).

An election waits on a name another session holds (so the engine keeps its session, its candidacy
and its notifications going), the server stops for ``OUTAGE`` seconds and starts again.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import pytest

from django_simba.engine import Election, Engine, EngineConfig
from django_simba.spi import LeaseBackend
from django_simba.testing import wait_until

#: How long the server is down (issue 23: 29 WARNING lines of pub/sub reconnects in such an outage).
OUTAGE = 16.0


class Server(Protocol):
    def stop(self) -> Any: ...
    def start(self) -> Any: ...


def sit_through_an_outage(
    server: Server,
    make_backend: Callable[[], LeaseBackend],
    config: EngineConfig,
    caplog: pytest.LogCaptureFixture,
    recovered: Callable[[Engine, Election], bool],
) -> list[logging.LogRecord]:
    """What ``django_simba``'s loggers (at DEBUG) and any other (at WARNING) logged from the moment
    the server stopped until ``recovered`` after it started again."""
    other, backend = make_backend(), make_backend()
    held = other.open_session(300, "other").session_id
    assert other.acquire(held, "noise.leader") is not None  # the election waits, watching the name
    engine = Engine(backend, config)
    try:
        election = engine.election("noise.leader")
        wait_until(lambda: election.wait_decided(0) and backend.notifying, 20, message="watching")
        with caplog.at_level(logging.DEBUG, logger="django_simba"):
            server.stop()
            down_since = time.monotonic()
            wait_until(lambda: time.monotonic() - down_since >= OUTAGE, OUTAGE + 5, message="the outage")
            server.start()
            wait_until(lambda: recovered(engine, election), 60, message="recovered")
        return list(caplog.records)
    finally:
        engine.close()
        other.close()


def told_once_each(records: list[logging.LogRecord], expected: Mapping[str, str]) -> dict[str, str]:
    """The WARNING lines of ``records`` by the kind (a pattern of ``expected``) each is; every kind
    once, and no other line."""
    warnings = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    kinds = [
        next((what for what, pattern in expected.items() if re.search(pattern, line)), line)
        for line in warnings
    ]
    assert sorted(kinds) == sorted(expected), warnings
    return dict(zip(kinds, warnings, strict=True))
