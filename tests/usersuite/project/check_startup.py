"""Under pytest (and in pytest-xdist workers) django-simba starts no engine when Django starts."""

import os
import sys

from shop import startup

from django_simba.servers.autostart import autostart_decision


def test_no_engine_was_started_when_django_started() -> None:
    assert startup.ENGINE_STARTED is False


def test_the_decision_names_the_test_run() -> None:
    start, reason = autostart_decision(sys.argv, os.environ)
    assert not start
    assert "running tests" in reason
