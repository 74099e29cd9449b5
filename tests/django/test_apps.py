"""Where the keep-alive thread starts: serving processes only, once, never for migrate & co."""

from __future__ import annotations

import threading

import pytest
from django.test import override_settings

from django_simba import registry
from django_simba.apps import autostart_decision, maybe_autostart


@pytest.mark.parametrize(
    ("argv", "environ", "starts"),
    [
        (["manage.py", "migrate"], {}, False),
        (["manage.py", "makemigrations"], {}, False),
        (["manage.py", "collectstatic", "--noinput"], {}, False),
        (["manage.py", "test"], {}, False),
        (["manage.py", "runserver"], {}, False),  # the autoreloader's watcher
        (["manage.py", "runserver"], {"RUN_MAIN": "true"}, True),  # its serving child
        (["manage.py", "runserver", "--noreload"], {}, True),
        (["manage.py", "simba_run", "--lock", "x", "--", "true"], {}, True),
        (["/venv/bin/gunicorn", "project.wsgi"], {}, True),
        (["/venv/bin/celery", "-A", "proj", "worker"], {}, True),
        (["/venv/bin/pytest"], {}, False),
        # python -m pytest: not the management command "-q" of a __main__.py
        (["/venv/lib/python3.11/site-packages/pytest/__main__.py", "-q"], {}, False),
        (["/venv/lib/python3.11/site-packages/pytest/__main__.py", "tests/test_x.py"], {}, False),
        (["-c"], {"PYTEST_XDIST_WORKER": "gw0"}, False),  # a pytest-xdist worker
        (["-c"], {}, True),  # python -c, outside any test run
        # started by a test of an xdist worker: what its own command line says
        (["/venv/bin/gunicorn", "project.wsgi"], {"PYTEST_XDIST_WORKER": "gw1"}, True),
        (["/venv/lib/python3.11/site-packages/django/__main__.py", "runserver", "--noreload"], {}, True),
    ],
)
def test_autostart_decision(argv, environ, starts):
    assert autostart_decision(argv, environ)[0] is starts


@override_settings(SIMBA={"BACKEND": "memory", "LEASE_DURATION": 3, "RENEW_INTERVAL": 1})
def test_autostart_starts_one_engine_idempotently():
    try:
        assert maybe_autostart(["gunicorn"], {})
        engine = registry.get_engine()
        assert engine.started
        threads = threading.active_count()
        assert maybe_autostart(["gunicorn"], {})  # ready() may run twice
        assert registry.get_engine() is engine
        assert threading.active_count() == threads
        assert engine.wait_for_session(5)
    finally:
        registry.reset()


@override_settings(SIMBA={"BACKEND": "memory", "AUTOSTART": False, "LEASE_DURATION": 3, "RENEW_INTERVAL": 1})
def test_autostart_false_starts_nothing_until_first_use():
    from django_simba import lock

    try:
        assert not maybe_autostart(["gunicorn"], {})
        assert registry.peek_engine() is None or not registry.peek_engine().started
        with lock("lazy", timeout=5) as term:
            assert term.token == 1
        assert registry.get_engine().started
    finally:
        registry.reset()


def test_migrate_starts_no_thread(tmp_path):
    import subprocess
    import sys

    code = (
        "import threading, django, sys; "
        "sys.argv = ['manage.py', 'migrate']; django.setup(); "
        "from django_simba import registry; "
        "print(registry.peek_engine(), threading.active_count())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={
            **__import__("os").environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTEST_CURRENT_TEST": "",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.split() == ["None", "1"]
