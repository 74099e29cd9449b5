"""@singleton_task under real task-queue workers: a Celery worker and an RQ worker, on Redis.

A skipped call must be a success that the result backend stores: Celery's and
RQ's JSON serializers, which refused the old ``Skipped`` dataclass (the task
ended in FAILURE with an EncodeError). The test holds the task's name from a
session of its own, so every call the worker takes is skipped until it lets go.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.decorators import Skipped
from django_simba.testing import wait_until
from tests.django.processes import (
    child_environ,
    console_script,
    forget_redis_keys,
    redis_url_or_skip,
    running,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

SKIPPED_CALLS = 50


@pytest.fixture
def redis_url() -> str:
    return redis_url_or_skip()


@pytest.fixture
def prefix() -> str:
    return f"queues-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def elsewhere(redis_url: str) -> Iterator[tuple[RedisBackend, str]]:
    """A session of another instance, on the workers' Redis: it takes names from them."""
    backend = RedisBackend({"url": redis_url}, timeout=5)
    session_id = backend.open_session(60, "host=elsewhere").session_id
    yield backend, session_id
    backend.close_session(session_id)
    backend.close()


@pytest.fixture(autouse=True)
def tidy(redis_url: str, prefix: str) -> Iterator[None]:
    yield
    forget_redis_keys(redis_url, f"*{prefix}*")  # the test's lease keys and its queue's bindings


def worker_environ(redis_url: str, prefix: str, **extra: str) -> dict[str, str]:
    simba = {"BACKEND": "redis", "OPTIONS": {"url": redis_url}, "LEASE_DURATION": 6, "RENEW_INTERVAL": 2}
    return child_environ("tests.django.process_settings", simba, SIMBA_QUEUE_PREFIX=prefix, **extra)


def celery_worker_argv(queue: str, *, concurrency: int, hostname: str | None = None) -> list[str]:
    """A Celery worker of ``tests.django.queues.celery_worker`` (prefork) on ``queue``."""
    named = [] if hostname is None else ["--hostname", hostname]
    return [
        console_script("celery"),
        "-A",
        "tests.django.queues.celery_worker",
        "worker",
        "--pool",
        "prefork",
        "--concurrency",
        str(concurrency),
        *named,
        "--queues",
        queue,
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "--loglevel",
        "INFO",
    ]


def rq_worker_argv(redis_url: str, queue: str) -> list[str]:
    """An RQ worker that empties ``queue`` and quits, with RQ's JSON serializer.

    Its class listens for no commands, so that it quits at once (``tests/django/rq_worker.py``).
    """
    return [
        console_script("rq"),
        "worker",
        "--burst",
        "--worker-class",
        "tests.django.rq_worker.CommandlessWorker",
        "--url",
        redis_url,
        "--serializer",
        "rq.serializers.JSONSerializer",
        queue,
    ]


def celery_client(redis_url: str) -> Any:
    """A Celery app that sends tasks and reads results in JSON, as the workers do."""
    import celery

    client = celery.Celery("simba-tests-client", broker=redis_url, backend=redis_url)
    client.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])
    return client


# -- Celery -----------------------------------------------------------------------------------


def test_celery_stores_skipped_calls_as_successes_and_warns_about_leader_mode(redis_url, prefix, elsewhere):
    backend, other = elsewhere
    queue = f"simba-tests-{prefix}"
    client = celery_client(redis_url)
    environ = worker_environ(redis_url, prefix, SIMBA_CELERY_URL=redis_url, SIMBA_CELERY_QUEUE=queue)
    argv = celery_worker_argv(queue, concurrency=2)
    try:
        with running(argv, environ) as (_, output):
            wait_until(lambda: output.matches(r"celery@\S+ ready"), 60, message="the Celery worker is ready")
            assert backend.acquire(other, f"{prefix}:celery-report") is not None
            results = [
                client.send_task("simba_tests.locked_report", args=[i], queue=queue)
                for i in range(SKIPPED_CALLS)
            ]
            values = [result.get(timeout=60, propagate=False) for result in results]
            assert [result.state for result in results] == ["SUCCESS"] * SKIPPED_CALLS, output.text()
            skips = [Skipped.from_result(value) for value in values]
            assert all(skip is not None and "holds the lock" in skip.reason for skip in skips), values[:3]
            assert skips[0].holder is not None and skips[0].holder.metadata == "host=elsewhere"

            backend.release(other, f"{prefix}:celery-report")
            ran = client.send_task("simba_tests.locked_report", args=[7], queue=queue).get(timeout=60)
            assert ran["x"] == 7 and ran["token"] > 1

            assert backend.acquire(other, f"{prefix}:celery-leader") is not None
            led = client.send_task("simba_tests.leader_report", args=[1], queue=queue)
            assert Skipped.from_result(led.get(timeout=60)) is not None and led.state == "SUCCESS"
            wait_until(
                lambda: output.matches(r"leader-mode singleton_task .*celery-leader.* runs in a Celery task"),
                10,
                message="the worker warned about leader mode on a queued task",
            )
    finally:
        client.close()


def test_celery_runs_one_call_per_invoice_at_a_time_on_two_workers(redis_url, prefix):
    """Two workers, one task named per invoice: runs for two invoices meet inside their locks at a
    barrier (so they ran at the same time); a run for an invoice already running is skipped."""
    import celery
    import redis

    queue = f"simba-tests-{prefix}"
    client = celery_client(redis_url)
    shared = redis.Redis.from_url(redis_url, decode_responses=True)
    environ = worker_environ(redis_url, prefix, SIMBA_CELERY_URL=redis_url, SIMBA_CELERY_QUEUE=queue)

    def meeting(invoice: int, barrier: str) -> celery.result.AsyncResult:
        return client.send_task("simba_tests.invoice_meeting", args=[invoice, barrier, 2], queue=queue)

    try:
        with ExitStack() as stack:
            names = [f"{worker}@{prefix}" for worker in ("w1", "w2")]
            outputs = [
                stack.enter_context(running(argv, environ))[1]
                for argv in (celery_worker_argv(queue, concurrency=1, hostname=name) for name in names)
            ]
            for name, output in zip(names, outputs):
                wait_until(lambda o=output, n=name: o.matches(rf"{n} ready"), 60, message=f"{name} is ready")

            # different invoices: each run waits inside its lock until the other one is inside too
            one, two = meeting(1, "apart"), meeting(2, "apart")
            first, second = one.get(timeout=90), two.get(timeout=90)
            assert first["met"] and second["met"], (first, second, [o.text() for o in outputs])
            assert first["pid"] != second["pid"]
            assert first["inside"] == second["inside"] == 1

            # the same invoice: while one run waits inside, the other worker's run is skipped
            held = meeting(3, "together")
            wait_until(lambda: shared.get(f"{prefix}:arrived:together") == "1", 60, message="the run is in")
            skip = Skipped.from_result(meeting(3, "together").get(timeout=60))
            assert skip is not None, "two runs for invoice 3 at once"
            assert skip.name == f"{prefix}:invoice:3" and "holds the lock" in skip.reason
            assert skip.holder is not None and skip.holder.name == f"{prefix}:invoice:3"
            shared.set(f"{prefix}:let-go:together", 1)
            alone = held.get(timeout=90)
            assert alone["inside"] == 1 and not alone["met"], alone

            # waiting runs for two invoices, interleaved: each invoice's runs take turns
            queued = [
                client.send_task("simba_tests.invoice_queued", args=[invoice], queue=queue)
                for invoice in itertools.islice(itertools.cycle((4, 5)), 12)
            ]
            done = [result.get(timeout=120) for result in queued]
    finally:
        client.close()
        shared.close()
    assert all(run["inside"] == 1 for run in done), done
    for invoice in (4, 5):
        tokens = [run["token"] for run in done if run["invoice"] == invoice]
        assert len(tokens) == 6 and len(set(tokens)) == 6, tokens
    assert len({run["pid"] for run in done}) == 2, "both workers took part"


# -- RQ ---------------------------------------------------------------------------------------


def test_rq_with_its_json_serializer_stores_skipped_jobs_as_finished(redis_url, prefix, elsewhere):
    import redis
    import rq
    from rq.serializers import JSONSerializer

    backend, other = elsewhere
    connection = redis.Redis.from_url(redis_url)
    queue = rq.Queue(f"simba-tests-{prefix}", connection=connection, serializer=JSONSerializer)
    assert backend.acquire(other, f"{prefix}:rq-report") is not None
    assert backend.acquire(other, f"{prefix}:rq-leader") is not None
    skipped = [queue.enqueue("tests.django.queues.rq_jobs.locked_report", i) for i in range(5)]
    led = queue.enqueue("tests.django.queues.rq_jobs.leader_report", 1)
    argv = rq_worker_argv(redis_url, queue.name)
    try:
        with running(argv, worker_environ(redis_url, prefix)) as (process, output):
            process.wait(120)
            for job in [*skipped, led]:
                job.refresh()
                assert job.get_status() == "finished", output.text()
                skip = Skipped.from_result(job.return_value())
                assert skip is not None and skip.holder is not None, job.return_value()
            assert output.matches(r"leader-mode singleton_task .*rq-leader.* runs in an RQ job")

        backend.release(other, f"{prefix}:rq-report")
        ran = queue.enqueue("tests.django.queues.rq_jobs.locked_report", 7)
        with running(argv, worker_environ(redis_url, prefix)) as (process, output):
            process.wait(120)
        ran.refresh()
        assert ran.get_status() == "finished", output.text()
        assert ran.return_value()["x"] == 7
    finally:
        queue.delete(delete_jobs=True)
        connection.close()


def test_rq_jobs_named_per_invoice_skip_only_the_invoice_held(redis_url, prefix, elsewhere):
    import redis
    import rq
    from rq.serializers import JSONSerializer

    backend, other = elsewhere
    connection = redis.Redis.from_url(redis_url)
    queue = rq.Queue(f"simba-tests-{prefix}", connection=connection, serializer=JSONSerializer)
    assert backend.acquire(other, f"{prefix}:rq-invoice:1") is not None
    jobs = [queue.enqueue("tests.django.queues.rq_jobs.invoice_report", invoice) for invoice in (1, 2)]
    jobs.append(queue.enqueue("tests.django.queues.rq_jobs.invoice_report", invoice_id=3))
    argv = rq_worker_argv(redis_url, queue.name)
    try:
        with running(argv, worker_environ(redis_url, prefix)) as (process, output):
            process.wait(120)
        for job in jobs:
            job.refresh()
            assert job.get_status() == "finished", output.text()
        held, free, by_keyword = (job.return_value() for job in jobs)
    finally:
        queue.delete(delete_jobs=True)
        connection.close()
    skip = Skipped.from_result(held)
    assert skip is not None and skip.name == f"{prefix}:rq-invoice:1", held
    assert skip.holder is not None and skip.holder.metadata == "host=elsewhere"
    assert free == {"invoice": 2, "name": f"{prefix}:rq-invoice:2"}
    assert by_keyword == {"invoice": 3, "name": f"{prefix}:rq-invoice:3"}
