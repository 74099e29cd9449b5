"""Which processes serve, and where the keep-alive thread starts: serving processes only, once."""

from __future__ import annotations

import threading

import pytest
from django.test import override_settings

from django_simba import registry
from django_simba.servers import serving
from django_simba.servers.autostart import autostart_decision, maybe_autostart


@pytest.mark.parametrize(
    ("argv", "environ", "starts"),
    [
        (["manage.py", "migrate"], {}, False),
        (["manage.py", "makemigrations"], {}, False),
        (["manage.py", "collectstatic", "--noinput"], {}, False),
        (["manage.py", "test"], {}, False),
        (["manage.py", "help"], {}, False),
        (["manage.py"], {}, False),
        (["manage.py", "shell", "-c", "pass"], {}, False),
        (["manage.py", "changepassword", "admin"], {}, False),
        (["manage.py", "createsuperuser", "--noinput"], {}, False),
        (["manage.py", "check", "--deploy"], {}, False),
        (["manage.py", "simba_status"], {}, False),
        (["manage.py", "my_own_command"], {}, False),
        (["manage.py", "runserver"], {}, False),  # the autoreloader's watcher
        (["manage.py", "runserver"], {"RUN_MAIN": "true"}, True),  # its serving child
        (["manage.py", "runserver", "--noreload"], {}, True),
        (["manage.py", "db_worker", "--reload"], {}, False),  # the autoreloader's watcher
        (["manage.py", "db_worker", "--reload"], {"RUN_MAIN": "true"}, True),
        (["manage.py", "db_worker"], {}, True),  # DEBUG is False: no reloader
        (["manage.py", "rqworker", "default"], {}, True),
        (["manage.py", "simba_run", "--lock", "x", "--", "true"], {}, True),
        (["/venv/bin/gunicorn", "project.wsgi"], {}, True),
        (["/venv/bin/uvicorn", "project.asgi:application"], {}, True),
        (["/venv/bin/celery", "-A", "proj", "beat"], {}, True),
        (["/venv/bin/rq", "worker"], {}, True),
        (["/venv/bin/pytest"], {}, False),
        # python -m pytest: not the management command "-q" of a __main__.py
        (["/venv/lib/python3.11/site-packages/pytest/__main__.py", "-q"], {}, False),
        (["/venv/lib/python3.11/site-packages/pytest/__main__.py", "tests/test_x.py"], {}, False),
        (["-c"], {"PYTEST_XDIST_WORKER": "gw0"}, False),  # a pytest-xdist worker
        (["-c"], {}, False),  # python -c: no server
        (["/srv/app/script.py"], {}, False),
        # started by a test of an xdist worker: what its own command line says
        (["/venv/bin/gunicorn", "project.wsgi"], {"PYTEST_XDIST_WORKER": "gw1"}, True),
        (["/venv/lib/python3.11/site-packages/django/__main__.py", "runserver", "--noreload"], {}, True),
        (["/venv/lib/python3.11/site-packages/django/__main__.py", "shell"], {}, False),
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
        assert maybe_autostart(["gunicorn"], {})  # ready() may run twice
        assert registry.get_engine() is engine
        assert engine.wait_for_session(5)
        # One engine, so one runtime: one timer thread and each lane once. (Not a thread count:
        # the runtime starts a lane's thread at its first job, which may fall between two counts.)
        names = [t.name for t in threading.enumerate() if t.name.startswith("simba-")]
        assert names.count("simba-timer") == 1, names
        assert len(names) == len(set(names)), names
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


# -- which processes serve ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "environ", "role"),
    [
        (["manage.py", "runserver"], {}, "FORKS"),  # the autoreloader's watcher
        (["manage.py", "runserver"], {"RUN_MAIN": "true"}, "SERVES"),  # its serving child
        (["manage.py", "runserver", "--noreload"], {}, "SERVES"),
        (["/venv/bin/celery", "-A", "proj", "worker", "--pool", "solo"], {}, "FORKS"),  # until worker_init
        (["/venv/bin/celery", "-A", "proj", "beat"], {}, "SERVES"),
        (["/venv/bin/gunicorn", "--preload", "proj.wsgi"], {}, "FORKS"),  # not inside a gunicorn worker
        (["/venv/bin/uvicorn", "proj.asgi:application"], {}, "SERVES"),
        (["manage.py", "simba_run", "--lock", "x", "--", "true"], {}, "SERVES"),
        (["manage.py", "shell"], {}, "IDLE"),
        (["manage.py", "help"], {}, "IDLE"),
        (["manage.py", "test"], {}, "SERVES"),  # tests lead, though nothing starts by itself there
        (["/venv/bin/pytest"], {}, "SERVES"),
        (["/srv/app/scheduler.py"], {}, "IDLE"),
    ],
)
def test_which_processes_serve(argv, environ, role):
    import celery  # noqa: F401  (a server is recognised only where its modules are loaded)
    import gunicorn.arbiter  # noqa: F401

    from django_simba.servers import serving

    assert serving.detect(argv, environ).role is serving.Role[role]


def test_the_settings_name_more_serving_commands_and_programs():
    from django_simba.servers import serving

    named = frozenset({"run_scheduler", "daphne"})
    assert serving.detect(["manage.py", "run_scheduler"], {}, serving_commands=named).serves
    assert serving.detect(["/venv/bin/daphne", "proj.asgi:application"], {}, serving_commands=named).serves
    assert not serving.detect(["manage.py", "shell"], {}, serving_commands=named).serves


def test_the_prefork_setting_decides_where_nothing_was_learnt():
    import gunicorn.arbiter  # noqa: F401

    from django_simba.servers import serving

    master = ["/venv/bin/gunicorn", "--preload", "proj.wsgi"]
    assert serving.detect(["/venv/bin/uvicorn", "x"], {}, prefork_parent=True).role is serving.Role.FORKS
    assert serving.detect(master, {}, prefork_parent=False).serves


def test_the_public_helper_answers_for_this_process():
    from django_simba import is_serving_process

    assert is_serving_process() is True  # a test run: tests lead


@pytest.mark.parametrize(
    ("pool", "forks"), [("prefork", True), ("processes", True), ("solo", False), ("threads", False)]
)
def test_celery_pools_that_fork(pool, forks):
    from django_simba.servers.celery import pool_forks

    assert pool_forks(pool) is forks


def test_the_serving_decision_follows_the_settings_it_reads(monkeypatch):
    """Decided once per process, but again when SIMBA changes: decided inside this override, a
    prefork parent stayed the answer for the rest of the test worker, whose elections never led."""
    monkeypatch.setattr(serving, "_learnt", None)  # what a server's hook may have told this process
    with override_settings(SIMBA={"BACKEND": "memory", "PREFORK_PARENT": True}):
        assert serving.decision().role is serving.Role.FORKS
    assert serving.decision().serves  # a test run


@override_settings(
    SIMBA={"BACKEND": "memory", "PREFORK_PARENT": True, "LEASE_DURATION": 3, "RENEW_INTERVAL": 1}
)
def test_a_prefork_parent_starts_nothing_and_its_forked_child_starts_with_the_candidacy():
    import os

    from django_simba import election
    from django_simba.testing import wait_until

    try:
        assert not maybe_autostart(["gunicorn"], {})
        engine = registry.get_engine()
        leader = election("apps.prefork")
        assert not engine.started and engine.fork_hold.active and engine.fork_hold.start_in_child
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                wait_until(lambda: leader.is_leader, 5)
                os.write(write, f"{engine.started}|{registry.get_engine() is engine}".encode())
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        assert os.read(read, 100).decode() == "True|True"
        os.close(read)
        assert not engine.started and not leader.is_leader
    finally:
        registry.reset()


def test_the_lifespan_wrapper_closes_the_engine_at_shutdown():
    import asyncio

    from django_simba.servers.asgi import SimbaLifespan

    seen: list[str] = []

    async def application(scope, receive, send):
        seen.append(scope["type"])

    async def run() -> list[dict]:
        wrapped = SimbaLifespan(application)
        messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
        sent: list[dict] = []

        async def receive():
            return next(messages)

        async def send(message):
            sent.append(message)

        await wrapped({"type": "http"}, receive, send)
        await wrapped({"type": "lifespan"}, receive, send)
        return sent

    with override_settings(SIMBA={"BACKEND": "memory", "LEASE_DURATION": 3, "RENEW_INTERVAL": 1}):
        try:
            engine = registry.get_engine().start()
            assert engine.wait_for_session(5)
            sent = asyncio.run(run())
            assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
            assert seen == ["http"] and engine.closed
        finally:
            registry.reset()
