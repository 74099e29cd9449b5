"""The Celery app of the worker the tests start: JSON for messages and results, as Celery's default."""

import os

from celery import Celery

from django_simba.decorators import current_term, singleton_task

from . import PREFIX

URL = os.environ.get("SIMBA_CELERY_URL", "redis://127.0.0.1:6379/15")

app = Celery("simba-tests", broker=URL, backend=URL)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    result_expires=600,
    task_default_queue=os.environ.get("SIMBA_CELERY_QUEUE", "simba-tests"),
    broker_connection_retry_on_startup=True,
)


@app.task(name="simba_tests.locked_report")
@singleton_task(f"{PREFIX}:celery-report", mode="lock")
def locked_report(x: int) -> dict[str, int]:
    term = current_term()
    assert term is not None
    return {"x": x, "token": term.token}


@app.task(name="simba_tests.leader_report")
@singleton_task(f"{PREFIX}:celery-leader")
def leader_report(x: int) -> int:
    return x
