"""The shop's code under its test suite: with and without database access, in the test's
transaction, with transaction=True, inside atomic() blocks, and after the flushes."""

import time

import pytest
from django.db import transaction
from shop.jobs import add_to_invoice, nightly_report, scheduler_tick
from shop.models import Invoice
from shop.testing import on_memory

from django_simba import lock, owner, registry
from django_simba.spi import BackendUnavailable
from django_simba.testing import wait_until

LEASE = 2.0


def test_without_database_access(name: str) -> None:
    if on_memory():
        with lock(name, timeout=5) as term:
            assert term.token == 1
    else:  # the database backend needs the django_db mark, as any database access does
        with pytest.raises(BackendUnavailable, match="django_db"):
            lock(name, timeout=0).acquire()


def exercise(name: str) -> None:
    """What the shop's code does with locks, all of it after the test's transaction wrote."""
    invoice = Invoice.objects.create()
    first = add_to_invoice(invoice.pk, 5)
    second = add_to_invoice(invoice.pk, 1, timeout=None)
    assert second > first
    invoice.refresh_from_db()
    assert (invoice.total, invoice.fence) == (6, second)
    with transaction.atomic():
        Invoice.objects.create(total=1)
        with lock(name, timeout=5) as term:
            info = owner(name)
            assert info is not None and info.token == term.token
        assert owner(name) is None  # released from inside the transaction
    with lock(name, timeout=None) as again:
        assert again.token > term.token


@pytest.mark.django_db
def test_in_the_tests_transaction(name: str) -> None:
    exercise(name)


@pytest.mark.django_db(transaction=True)
def test_with_transaction_true(name: str) -> None:
    exercise(name)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(3))
def test_singleton_tasks_after_each_flush(round_: int) -> None:
    Invoice.objects.create()
    assert nightly_report() == 1  # the lock-mode task ran: not skipped, no expired session
    assert scheduler_tick() == "ticked"  # and this process leads the scheduler


@pytest.mark.django_db
def test_a_write_transaction_longer_than_the_lease(name: str) -> None:
    engine = registry.get_engine()
    with lock(name, timeout=5) as term:
        session = engine.session_id
        with transaction.atomic():
            Invoice.objects.create()
            began = time.monotonic()
            wait_until(lambda: time.monotonic() - began > 2.5 * LEASE, 30, message="two and a half leases")
            assert term.is_valid()
        assert term.is_valid() and engine.session_id == session
