"""The demo's periodic job: every worker calls it each period; it runs on the elected leader only."""

from django.db import transaction
from django.db.models import F

from django_simba import singleton_task
from django_simba.decorators import current_term

from .fencing import StaleToken, fenced_update
from .models import Tick, Ticker

JOB = "demo.ticker"


@singleton_task(JOB)
def tick(run: str, period: int, worker: str) -> bool:
    """Count one tick on the run's ticker, fenced by this term's token; record the execution."""
    token = current_term().token
    with transaction.atomic():
        try:
            fenced_update(Ticker.objects.filter(run=run), token, ticks=F("ticks") + 1)
            accepted = True
        except StaleToken:
            accepted = False
        Tick.objects.create(run=run, period=period, token=token, worker=worker, accepted=accepted)
    return accepted
