"""The demo's periodic job: every worker calls it each period; it runs on the elected leader only."""

from django.db import transaction
from django.db.models import F

from django_simba import StaleToken, fenced, singleton_task
from django_simba.decorators import current_term

from .models import Tick, Ticker

JOB = "demo.ticker"


@singleton_task(JOB)
def tick(run: str, period: int, worker: str) -> bool:
    """Count one tick on the run's ticker and record it, in one transaction fenced by this term."""
    term = current_term()
    try:
        with transaction.atomic(), fenced(term):
            # The fenced row first: its row lock orders this transaction against a newer term's.
            Ticker.objects.filter(run=run).fenced_update(ticks=F("ticks") + 1)
            Tick.objects.create(run=run, period=period, token=term.token, worker=worker, accepted=True)
    except StaleToken:  # a newer term wrote the ticker, or this term ended during the transaction
        Tick.objects.create(run=run, period=period, token=term.token, worker=worker, accepted=False)
        return False
    return True
