"""An outage of the PostgreSQL LISTEN connection is told as docs/observability.rst promises: once
when it begins, once more with the count of failed reconnection attempts when it answers again."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

import pytest
from django.db import connections

from django_simba.backends.database import DatabaseBackend
from django_simba.testing import wait_until

from .conftest import on
from .proxy import FreezableProxy

#: How long the listening connection's server is down (issue 23's Redis outage lasted as long).
OUTAGE = 16.0
LISTENER = "django_simba.backends.database.listener"


@pytest.mark.parametrize("alias", [pytest.param("postgresql", marks=on("postgresql"))], indirect=True)
def test_a_16_s_outage_of_the_listening_connection_is_two_lines(
    make_backend: Callable[..., DatabaseBackend], caplog: pytest.LogCaptureFixture
) -> None:
    """It logged a WARNING per reconnection attempt (a backoff of 50 ms doubling to 5 s: nine in 16 s)."""
    database = connections.settings["postgresql"]
    proxy = FreezableProxy(database["HOST"], int(database["PORT"]))  # in front of LISTEN only
    try:
        backend = make_backend(listen={"HOST": "127.0.0.1", "PORT": str(proxy.port)})
        backend.subscribe(lambda event: None)
        wait_until(lambda: backend.notifying, 10, message="listening")
        with caplog.at_level(logging.DEBUG, logger=LISTENER):
            proxy.down()
            down_since = time.monotonic()
            wait_until(lambda: time.monotonic() - down_since >= OUTAGE, OUTAGE + 5, message="the outage")
            proxy.up()
            wait_until(lambda: backend.notifying, 30, message="listening again")
        lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LISTENER]
    finally:
        proxy.close()  # the listener, still running, loses its connection again
    warnings = [line for level, line in lines if level >= logging.WARNING]
    attempts = [line for level, line in lines if level == logging.DEBUG and "interrupted" in line]
    assert len(warnings) == 2, warnings
    assert len(attempts) >= 5, lines  # the reconnection attempts that failed meanwhile, at DEBUG
    assert re.fullmatch(
        r"django-simba: PostgreSQL notifications interrupted \(.+\); the engine polls meanwhile "
        r"\(further failures are counted until the PostgreSQL LISTEN connection answers again\)",
        warnings[0],
    ), warnings
    back = re.match(
        r"django-simba: the PostgreSQL LISTEN connection answers again after 1\d s \((\d+) failed attempts;",
        warnings[1],
    )
    assert back is not None and int(back[1]) == len(attempts) + 1, warnings
