"""Reports written under fencing tokens: a late writer whose term was superseded is refused.

See docs/fencing.rst, which shows this code.
"""

from django_simba.fencing import Fenceable

from .models import Report


def save_report(name: str, body: str, term: Fenceable) -> bool:
    """Store a report built under ``term``; True if this created it. StaleToken if a newer term wrote it."""
    return Report.objects.fenced_upsert(term, name=name, defaults={"body": body})


async def asave_report(name: str, body: str, term: Fenceable) -> bool:
    """``save_report`` for async code."""
    return await Report.objects.afenced_upsert(term, name=name, defaults={"body": body})
