"""The jobs of the RQ worker the tests start (with RQ's JSON serializer)."""

from django_simba.decorators import current_term, singleton_task

from . import PREFIX


@singleton_task(f"{PREFIX}:rq-report", mode="lock")
def locked_report(x: int) -> dict[str, int]:
    term = current_term()
    assert term is not None
    return {"x": x, "token": term.token}


@singleton_task(f"{PREFIX}:rq-leader")
def leader_report(x: int) -> int:
    return x


@singleton_task(f"{PREFIX}:rq-invoice:{{invoice_id}}", mode="lock")
def invoice_report(invoice_id: int) -> dict[str, object]:
    term = current_term()
    assert term is not None
    return {"invoice": invoice_id, "name": term.name}
