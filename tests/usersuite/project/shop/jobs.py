"""The shop's code under test: a fenced write under a lock, and two singleton tasks."""

from django.db import transaction
from django.db.models import Q

from django_simba import lock, singleton_task

from .models import Invoice


class StaleHolder(Exception):
    pass


def add_to_invoice(pk: int, amount: int, timeout: float | None = 5) -> int:
    """Add ``amount`` under the invoice's lock, fenced by the term's token; returns the token."""
    with lock(f"shop.invoice.{pk}", timeout=timeout) as term, transaction.atomic():
        invoice = Invoice.objects.select_for_update().get(pk=pk)
        updated = Invoice.objects.filter(Q(pk=pk), Q(fence__lte=term.token)).update(
            total=invoice.total + amount, fence=term.token
        )
        if not updated:
            raise StaleHolder(pk)
        return term.token


@singleton_task("shop.nightly", mode="lock", timeout=0)
def nightly_report() -> int:
    return Invoice.objects.count()


@singleton_task("shop.scheduler")
def scheduler_tick() -> str:
    return "ticked"
