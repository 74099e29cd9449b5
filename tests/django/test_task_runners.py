"""@singleton_task under the task runners users put it in: Celery, RQ and a management command."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.test import override_settings

from django_simba import registry, singleton_task
from django_simba.decorators import Skipped

SIMBA = {"BACKEND": "memory", "LEASE_DURATION": 3, "RENEW_INTERVAL": 1}


@pytest.fixture(autouse=True)
def fresh_engine():
    with override_settings(SIMBA=SIMBA):
        yield
    registry.reset()


def hold_elsewhere(name: str) -> None:
    """Another instance leads ``name``."""
    backend = registry.get_engine().backend
    other = backend.open_session(30, "host=other").session_id
    assert backend.acquire(other, name) is not None


def test_celery_task_runs_on_the_leader_only():
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

    assert double.delay(21).get(timeout=5) == 42
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
