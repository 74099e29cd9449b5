"""Fencing tokens for Django models: a row refuses the writes of a term older than the newest that wrote it.

::

    from django_simba import lock
    from django_simba.fencing import FencedModel, StaleToken, fenced

    class Report(FencedModel):          # adds fence_token and fence_lease (make a migration)
        name = models.CharField(max_length=100, unique=True)
        body = models.TextField()

    with lock("reports:daily") as term, fenced(term):
        Report.objects.fenced_upsert(name="daily", defaults={"body": build()})

See docs/fencing.rst. Importing this package needs no app registry; the model
classes (``FencedModel`` and the fields) are loaded on first use, as model
code must run once the apps are loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import StaleToken, TermEnded, WrongLease
from ..lazy import lazy_exports
from .managers import FencedManager, FencedQuerySet
from .section import fenced, section_term
from .tokens import Fence, Fenceable
from .updates import afenced_update, afenced_upsert, fenced_update, fenced_upsert

if TYPE_CHECKING:
    from .fields import FenceLeaseField, FenceTokenField
    from .mixin import FencedModel

_MODEL_CODE = {
    "FencedModel": "django_simba.fencing.mixin",
    "FenceLeaseField": "django_simba.fencing.fields",
    "FenceTokenField": "django_simba.fencing.fields",
}


__getattr__ = lazy_exports(__name__, globals(), _MODEL_CODE)


__all__ = [
    "Fence",
    "FenceLeaseField",
    "FenceTokenField",
    "Fenceable",
    "FencedManager",
    "FencedModel",
    "FencedQuerySet",
    "StaleToken",
    "TermEnded",
    "WrongLease",
    "afenced_update",
    "afenced_upsert",
    "fenced",
    "fenced_update",
    "fenced_upsert",
    "section_term",
]
