"""Invalid settings are logged, with their check ids, when a serving process starts; the site keeps serving.

Serving processes (gunicorn, Celery and RQ workers) never run ``manage.py
check``, so the library reports its own settings there, once per process.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request

import pytest
from django.test import override_settings

from django_simba import registry
from django_simba.servers.autostart import maybe_autostart
from django_simba.testing import wait_until
from tests.django.processes import child_environ, console_script, running

TYPO = {"BACKEND": "memory", "LEASE_DURATON": 5}


@pytest.fixture(autouse=True)
def no_engine():
    yield
    registry.reset()


def simba_records(caplog: pytest.LogCaptureFixture) -> list[str]:
    records = caplog.records
    return [r.getMessage() for r in records if r.name == "django_simba" and r.levelno >= logging.WARNING]


@pytest.mark.parametrize("autostart", [True, False])
def test_a_serving_process_logs_invalid_settings_with_their_ids(caplog, autostart):
    with override_settings(SIMBA={**TYPO, "AUTOSTART": autostart}), caplog.at_level(logging.INFO):
        assert not maybe_autostart(["/srv/venv/bin/gunicorn", "site.wsgi"], {})
    lines = simba_records(caplog)
    assert any("django_simba.E002" in line and "LEASE_DURATON" in line for line in lines), lines
    assert any("not started" in line for line in lines)
    engine = registry.peek_engine()
    assert engine is None or not engine.started


def test_a_warning_is_logged_and_the_engine_still_starts(caplog):
    simba = {"BACKEND": "memory", "LEASE_DURATION": 6, "RENEW_INTERVAL": 2, "TIMEOUT": 3}
    with override_settings(SIMBA=simba), caplog.at_level(logging.INFO):
        assert maybe_autostart(["/srv/venv/bin/rq", "worker"], {})
    assert [line for line in simba_records(caplog) if "W001" in line]


def test_one_shot_commands_leave_the_report_to_the_check_framework(caplog):
    with override_settings(SIMBA=TYPO), caplog.at_level(logging.INFO):
        assert not maybe_autostart(["manage.py", "migrate"], {})
    assert simba_records(caplog) == []


def test_gunicorn_logs_a_typo_at_start_in_every_worker_and_serves_the_pages_that_need_no_lock():
    environ = child_environ("tests.django.tinysite.settings", {"LEASE_DURATON": 5})
    argv = [console_script("gunicorn"), "--workers", "2", "--bind", "127.0.0.1:0"]
    with running([*argv, "tests.django.tinysite.wsgi:application"], environ) as (_, output):
        listening = wait_until(
            lambda: output.matches(r"Listening at: http://127\.0\.0\.1:(\d+)"), 30, message="gunicorn listens"
        )
        port = listening[0].group(1)

        def booted_workers() -> set[str] | None:
            pids = {m.group(1) for m in output.matches(r"Booting worker with pid: (\d+)")}
            return pids if len(pids) == 2 else None

        workers = wait_until(booted_workers, 30, message="two workers booted")
        reported = r"pid=(\d+) ERROR django_simba .*E002.*LEASE_DURATON"
        wait_until(
            lambda: {m.group(1) for m in output.matches(reported)} == workers,
            30,
            message="every worker logged E002",
        )
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/plain/", timeout=10) as response:
            assert response.read() == b"plain"
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/locked/", timeout=10)
        assert caught.value.code == 500
