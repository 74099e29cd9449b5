"""Real cross-process behaviour: another process holds a lock, leads an election, crashes."""

import pytest
from shop.jobs import add_to_invoice, nightly_report, scheduler_tick
from shop.models import Invoice
from shop.testing import on_memory

from django_simba import owner
from django_simba.decorators import Skipped
from django_simba.testing import wait_until
from django_simba.testing.process import OtherProcess, OtherProcessError

shared = pytest.mark.skipif(on_memory(), reason="the memory backend lives in one process")


@shared
@pytest.mark.django_db(transaction=True)
def test_a_task_another_process_runs_is_skipped(simba_process: OtherProcess) -> None:
    theirs = simba_process.hold("shop.nightly")
    skipped = nightly_report()
    assert isinstance(skipped, Skipped) and skipped.holder is not None
    simba_process.release("shop.nightly")
    assert nightly_report() == 0
    info = owner("shop.nightly")
    assert info is None  # ours was released when the task returned
    assert theirs >= 1


@shared
@pytest.mark.django_db
def test_another_leader(simba_process: OtherProcess) -> None:
    simba_process.lead("shop.scheduler")
    assert isinstance(scheduler_tick(), Skipped)
    simba_process.resign("shop.scheduler")
    wait_until(lambda: scheduler_tick() == "ticked", 20, message="this process elected")


@shared
@pytest.mark.django_db
def test_a_crashed_holder_is_replaced_with_a_higher_token(simba_process: OtherProcess) -> None:
    invoice = Invoice.objects.create()
    theirs = simba_process.hold(f"shop.invoice.{invoice.pk}")
    simba_process.kill()  # nothing released: the lock is free once its session expires
    assert add_to_invoice(invoice.pk, 3, timeout=20) > theirs


@pytest.mark.skipif(not on_memory(), reason="the memory backend only")
def test_on_the_memory_backend_another_process_cannot_share_it() -> None:
    with pytest.raises(OtherProcessError, match="memory backend lives in"):
        OtherProcess.start()
