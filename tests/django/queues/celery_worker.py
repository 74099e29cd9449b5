"""The Celery app of the workers the tests start: JSON for messages and results, as Celery's default.

A worker takes a task only once it finished the one before (late acks, one prefetched message
per pool process): a task that waits keeps its worker busy, and the next one goes to another.
"""

import os
import time

import redis
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
    task_acks_late=True,
    worker_prefetch_multiplier=1,
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


#: How long an invoice run waits at its barrier before it gives up (the test lets it go sooner).
BARRIER_WAIT = 60


@app.task(name="simba_tests.invoice_meeting")
@singleton_task(f"{PREFIX}:invoice:{{invoice_id}}", mode="lock")
def invoice_meeting(invoice_id: int, barrier: str, parties: int) -> dict[str, object]:
    """Inside the invoice's lock, wait until ``parties`` runs reached ``barrier`` (or the test lets go).

    Redis keeps the shared record: how many runs of this invoice are inside at once, and who arrived.
    """
    term = current_term()
    assert term is not None
    shared = redis.Redis.from_url(URL)
    inside_key, arrived_key = f"{PREFIX}:inside:{invoice_id}", f"{PREFIX}:arrived:{barrier}"
    try:
        inside = int(shared.incr(inside_key))
        shared.incr(arrived_key)
        deadline = time.monotonic() + BARRIER_WAIT
        while int(shared.get(arrived_key) or 0) < parties and not shared.exists(f"{PREFIX}:let-go:{barrier}"):
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        met = int(shared.get(arrived_key) or 0) >= parties
        shared.decr(inside_key)
    finally:
        shared.close()
    return {"invoice": invoice_id, "inside": inside, "met": met, "pid": os.getpid(), "token": term.token}


@app.task(name="simba_tests.invoice_queued")
@singleton_task(f"{PREFIX}:queued:{{invoice_id}}", mode="lock", timeout=60)
def invoice_queued(invoice_id: int) -> dict[str, object]:
    """Wait for the invoice's lock, then work a little; counts the runs of the invoice inside at once."""
    term = current_term()
    assert term is not None
    shared = redis.Redis.from_url(URL)
    inside_key = f"{PREFIX}:inside-queued:{invoice_id}"
    try:
        inside = int(shared.incr(inside_key))
        time.sleep(0.05)  # the work: long enough for the other worker to try the same invoice meanwhile
        shared.decr(inside_key)
    finally:
        shared.close()
    return {"invoice": invoice_id, "inside": inside, "pid": os.getpid(), "token": term.token}
