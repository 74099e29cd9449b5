"""Singleton tasks in Django's task framework (django_simba.task_framework).

Which framework: Django's own ``django.tasks`` from Django 6 (tox env
py312-django6), the django-tasks backport on Django 5.2 (py311-django52), one
set of tests for both. Only where neither exists (Django 5.2 without the
backport) do they skip. In this process the tasks run on the framework's
``ImmediateBackend``; the last test starts several ``db_worker`` processes of
django-tasks-db on PostgreSQL.
"""

from __future__ import annotations

import itertools
import json
import logging
import subprocess
import sys
import uuid
from contextlib import ExitStack
from pathlib import Path

import django
import pytest
from django.db import connections

from django_simba import registry
from django_simba.backends.database import AnyDatabaseBackend
from django_simba.decorators import Skipped, current_term
from django_simba.spi import ConfigurationError
from django_simba.task_framework import framework, singleton_django_task
from django_simba.testing import wait_until
from tests.django.engines import MEMORY_SIMBA, fresh_engine_on, hold_elsewhere
from tests.django.processes import ROOT, child_environ, running

SIMBA = MEMORY_SIMBA


@pytest.fixture
def tasks():
    try:
        return framework()
    except ConfigurationError:
        pytest.skip("no task framework: Django 5.2 without the django-tasks backport")


fresh_engine = fresh_engine_on(SIMBA)


# The task functions are module-level functions, as the framework wants; each test makes its own Task.


def token_of_the_run(x):
    term = current_term()
    return {"x": x, "token": term.token, "valid": term.is_valid()}


def token_with_context(context, x):
    return {"x": x, "attempt": context.attempt, "token": current_term().token}


async def token_of_an_async_run(x):
    term = current_term()
    return {"x": x, "token": term.token}


def plain(x):
    return x


def invoice_run(context, invoice_id, kind="pdf"):
    return {"name": current_term().name, "attempt": context.attempt}


def test_the_framework_is_djangos_own_from_django_6(tasks):
    assert tasks.__name__ == ("django.tasks" if django.VERSION >= (6,) else "django_tasks")


def test_each_run_holds_the_lock_with_a_higher_token(tasks):
    report = singleton_django_task("framework.report")(token_of_the_run)
    assert isinstance(report, tasks.base.Task)
    first, second = report.enqueue(1), report.enqueue(2)
    assert first.status == second.status == tasks.TaskResultStatus.SUCCESSFUL
    assert first.return_value["valid"] and second.return_value["valid"]
    assert 0 < first.return_value["token"] < second.return_value["token"]
    assert registry.get_engine().owner("framework.report") is None  # given back after each run


def test_a_skipped_run_is_a_stored_success_that_says_why(tasks):
    report = singleton_django_task("framework.busy")(token_of_the_run)
    hold_elsewhere("framework.busy")
    result = report.enqueue(1)
    assert result.status == tasks.TaskResultStatus.SUCCESSFUL
    assert type(result.return_value) is dict  # what the framework stores: JSON values
    skipped = Skipped.from_result(result.return_value)
    assert skipped.reason == "another instance holds the lock" and skipped.holder.metadata == "host=other"


def test_task_options_reach_the_framework(tasks):
    report = singleton_django_task("framework.context", priority=5, takes_context=True)(token_with_context)
    assert (report.priority, report.takes_context) == (5, True)
    result = report.enqueue(3)
    assert result.status == tasks.TaskResultStatus.SUCCESSFUL, result.errors
    assert result.return_value["attempt"] == 1 and result.return_value["token"] > 0


def test_a_coroutine_task_runs_under_the_lock(tasks):
    report = singleton_django_task("framework.async")(token_of_an_async_run)
    result = report.enqueue(4)
    assert result.status == tasks.TaskResultStatus.SUCCESSFUL, result.errors
    assert result.return_value["token"] > 0
    assert registry.get_engine().owner("framework.async") is None
    hold_elsewhere("framework.async")
    assert Skipped.from_result(report.enqueue(5).return_value) is not None


def test_leader_mode_runs_on_the_leader_and_warns_when_declared(tasks, caplog):
    with caplog.at_level(logging.WARNING, "django_simba.tasks"):
        led = singleton_django_task("framework.led", mode="leader")(plain)
    assert "leader-mode singleton task" in caplog.text and "mode='lock'" in caplog.text
    assert led.enqueue(6).return_value == 6
    hold_elsewhere("framework.elsewhere")
    elsewhere = singleton_django_task("framework.elsewhere", mode="leader")(plain)
    skipped = Skipped.from_result(elsewhere.enqueue(7).return_value)
    assert skipped is not None and skipped.reason == "this instance is not the leader"


def test_a_name_made_from_the_run_arguments(tasks):
    send = singleton_django_task("framework.invoice:{invoice_id}:{kind}", takes_context=True)(invoice_run)
    assert send.enqueue(3).return_value == {"name": "framework.invoice:3:pdf", "attempt": 1}
    assert send.enqueue(invoice_id=4, kind="xml").return_value["name"] == "framework.invoice:4:xml"
    hold_elsewhere("framework.invoice:5:pdf")
    skipped = Skipped.from_result(send.enqueue(5).return_value)
    assert skipped is not None and skipped.name == "framework.invoice:5:pdf"
    with pytest.raises(ValueError, match="not a parameter"):
        singleton_django_task("framework.invoice:{number}", takes_context=True)(invoice_run)
    with pytest.raises(ValueError, match="needs mode='lock'"):
        singleton_django_task("framework.invoice:{invoice_id}", mode="leader")


def test_bad_arguments_fail_at_declaration(tasks):
    with pytest.raises(ValueError):
        singleton_django_task("bad name")
    with pytest.raises(ValueError):
        singleton_django_task("x", mode="everywhere")


# -- several db_worker processes, one name -------------------------------------------------------

WORKERS = 3
RUNS = 15
WORKER_SIMBA = {"BACKEND": "database", "LEASE_DURATION": 6, "RENEW_INTERVAL": 2}


@pytest.mark.postgresql
@pytest.mark.slow
@pytest.mark.django_db(transaction=True, databases=["default", "postgresql"])
def test_db_workers_run_a_singleton_task_one_at_a_time_with_increasing_tokens(tasks, tmp_path):
    pytest.importorskip("django_tasks_db")
    prefix = f"framework-{uuid.uuid4().hex[:12]}"
    runs_file = tmp_path / "runs.jsonl"
    environ = child_environ(
        "tests.django.taskworker_settings",
        WORKER_SIMBA,
        SIMBA_CHILD_DB_NAME=connections["postgresql"].settings_dict["NAME"],
        SIMBA_QUEUE_PREFIX=prefix,
        SIMBA_TASK_RUNS=str(runs_file),
    )
    manage(environ, "migrate", "django_tasks_database", "--noinput")
    observer = AnyDatabaseBackend.build({"alias": "postgresql"}, timeout=5)
    worker = [sys.executable, "-m", "django", "db_worker", "--interval", "0.05", "--no-startup-delay"]
    try:
        with ExitStack() as stack:
            outputs = [stack.enter_context(running(worker, environ))[1] for _ in range(WORKERS)]
            wait_until(
                lambda: (
                    sum("db_worker" in s.metadata for s in observer.sessions() if s.remaining > 0) >= WORKERS
                ),
                60,
                message="every worker is up (its session is open)",
            )
            enqueue(environ, "serial", range(RUNS))
            wait_until(lambda: len(read_runs(runs_file)) == RUNS, 120, message="every run is done")

            other = observer.open_session(60, "host=elsewhere").session_id
            assert observer.acquire(other, f"{prefix}:busy") is not None
            enqueue(environ, "busy", range(3))
            wait_until(lambda: len(results(prefix, "busy")) == 3, 60, message="the busy runs are done")
            observer.close_session(other)
            busy = results(prefix, "busy")
            assert [status for status, _ in busy] == ["SUCCESSFUL"] * 3, busy
            assert all(Skipped.from_result(value) is not None for _, value in busy), busy
    finally:
        observer.close()
    runs = sorted(read_runs(runs_file), key=lambda run: run["started"])
    assert sorted(run["n"] for run in runs) == list(range(RUNS))
    assert all(run["valid"] for run in runs)
    for before, after in itertools.pairwise(runs):
        assert before["finished"] <= after["started"], ("two runs overlapped", before, after)
        assert before["token"] < after["token"], ("tokens went back", before, after)
    assert len({run["pid"] for run in runs}) > 1, [o.text() for o in outputs]  # several workers took part
    assert [status for status, _ in results(prefix, "serial")] == ["SUCCESSFUL"] * RUNS


def manage(environ: dict[str, str], *args: str) -> None:
    argv = [sys.executable, "-m", "django", *args]
    done = subprocess.run(argv, env=environ, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.stdout, done.stderr)


def enqueue(environ: dict[str, str], task: str, arguments: range) -> None:
    code = (
        f"from tests.django.queues.framework_tasks import {task}\n"
        f"for n in {list(arguments)!r}:\n"
        f"    {task}.enqueue(n)\n"
    )
    manage(environ, "shell", "-c", code)


def read_runs(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def results(prefix: str, task: str) -> list[tuple[str, object]]:
    """Statuses and return values of the finished runs of ``task`` in the tasks table."""
    with connections["postgresql"].cursor() as cursor:
        cursor.execute(
            "SELECT status, return_value FROM django_tasks_database_dbtaskresult "
            "WHERE task_path = %s AND status IN ('SUCCESSFUL', 'FAILED') ORDER BY enqueued_at",
            [f"tests.django.queues.framework_tasks.{task}"],
        )
        rows = cursor.fetchall()
    return [(status, json.loads(value) if isinstance(value, str) else value) for status, value in rows]
