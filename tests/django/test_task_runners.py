"""@singleton_task under the task runners users put it in, in this process: Celery (eager), RQ (synchronous),
Django's task framework (ImmediateBackend) and a management command.

Real worker processes are in test_task_queues.py.
"""

from __future__ import annotations

import io
import json
import logging
import pickle

import pytest
from django.core.management import call_command
from django.core.management.base import BaseCommand

from django_simba import singleton_task
from django_simba.decorators import Skipped
from tests.django.engines import MEMORY_SIMBA, fresh_engine_on, hold_elsewhere

SIMBA = MEMORY_SIMBA


fresh_engine = fresh_engine_on(SIMBA)


def test_a_skip_is_falsy_says_why_and_survives_json_and_pickle():
    hold_elsewhere("plain.busy")

    @singleton_task("plain.busy", mode="lock")
    def busy():
        raise AssertionError("must not run")

    skipped = busy()
    assert isinstance(skipped, Skipped) and not skipped
    assert skipped.reason == "another instance holds the lock" and skipped.holder.metadata == "host=other"
    assert str(skipped) == "skipped plain.busy: another instance holds the lock (held by host=other)"
    stored = json.loads(json.dumps(skipped))
    assert type(stored) is dict and stored["skipped"] is True
    assert Skipped.from_result(stored) == skipped and Skipped.from_result(stored).holder == skipped.holder
    unpickled = pickle.loads(pickle.dumps(skipped))
    assert isinstance(unpickled, Skipped) and not unpickled and unpickled == skipped
    assert Skipped.from_result({"skipped": "yes"}) is None and Skipped.from_result(42) is None


def test_celery_task_runs_on_the_leader_only(caplog):
    import celery

    app = celery.Celery("simba-tests", broker="memory://", backend="cache+memory://")
    app.conf.task_always_eager = True

    @app.task
    @singleton_task("celery.double")
    def double(x):
        return x * 2

    @app.task
    @singleton_task("celery.elsewhere")
    def elsewhere():
        raise AssertionError("must not run")

    with caplog.at_level(logging.WARNING, "django_simba.tasks"):
        assert double.delay(21).get(timeout=5) == 42
    assert "runs in a Celery task" in caplog.text and "mode='lock'" in caplog.text
    hold_elsewhere("celery.elsewhere")
    assert isinstance(elsewhere.delay().get(timeout=5), Skipped)


def test_rq_job_runs_under_the_lock_only(redis_url):
    import redis
    import rq

    connection = redis.Redis.from_url(redis_url)
    queue = rq.Queue("simba-tests", connection=connection, is_async=False)
    job = queue.enqueue(locked_report, 5)
    assert job.return_value() == 6
    hold_elsewhere("rq.report")
    job = queue.enqueue(locked_report, 5)
    result = job.return_value()
    assert isinstance(result, Skipped) and "lock" in result.reason


@pytest.fixture
def redis_url():
    import os

    import redis

    url = os.environ.get("SIMBA_REDIS_URL", "redis://127.0.0.1:6379/15")
    try:
        redis.Redis.from_url(url, socket_timeout=2).ping()
    except redis.RedisError:
        from tests.conftest import server_missing

        server_missing("Redis")
    return url


@singleton_task("rq.report", mode="lock")
def locked_report(x):
    return x + 1


def report_body(x):
    return x + 1


@pytest.mark.parametrize(
    "framework",
    [
        pytest.param("django.tasks", id="django6"),  # Django 6 only: tox env py312-django6
        pytest.param("django_tasks", id="backport"),  # the django-tasks package, on every Django
    ],
)
def test_django_task_framework_stores_a_skip_as_a_success(framework):
    tasks = pytest.importorskip(framework, reason=f"{framework} does not exist in this Django version")
    report = tasks.task(singleton_task("djtasks.report", mode="lock")(report_body))
    assert report.enqueue(5).return_value == 6
    hold_elsewhere("djtasks.report")
    result = report.enqueue(5)
    assert result.status == tasks.TaskResultStatus.SUCCESSFUL
    skipped = Skipped.from_result(result.return_value)
    assert skipped is not None and skipped.holder.metadata == "host=other"


def test_management_command_handle_is_skipped_elsewhere():
    class Nightly(BaseCommand):
        @singleton_task("commands.nightly")
        def handle(self, *args, **options):
            return "ran"

    out = io.StringIO()
    call_command(Nightly(), stdout=out)
    assert out.getvalue().strip() == "ran"

    class Other(BaseCommand):
        @singleton_task("commands.other")
        def handle(self, *args, **options):
            return "ran"

    hold_elsewhere("commands.other")
    out = io.StringIO()
    call_command(Other(), stdout=out)
    assert out.getvalue() == ""  # a skipped handle returns a falsy Skipped: nothing printed
