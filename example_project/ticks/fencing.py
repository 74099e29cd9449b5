"""Fencing tokens on Django models: a write is applied only if no newer term wrote first.

See docs/fencing.rst, which shows this code.
"""

from django.db.models import QuerySet

from .models import Report


class StaleToken(Exception):
    """A newer term already wrote the resource: the caller's term is over, its write is refused."""


def fenced_update(rows: QuerySet, token: int, **values) -> int:
    """UPDATE ``rows`` with ``values`` where no newer token wrote them; raise StaleToken if none qualifies.

    One statement: the check and the write cannot be separated by another writer.
    """
    updated = rows.filter(fence__lte=token).update(fence=token, **values)
    if updated == 0:
        raise StaleToken(f"token {token} is older than the last writer's")
    return updated


def save_report(name: str, body: str, token: int) -> None:
    """Store a report built under the lease whose term has ``token``."""
    Report.objects.get_or_create(name=name)
    fenced_update(Report.objects.filter(name=name), token, body=body)
