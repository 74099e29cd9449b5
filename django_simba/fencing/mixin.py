"""``FencedModel``: an abstract model whose rows remember which term of which lease last wrote them."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import models

from .fields import FenceLeaseField, FenceTokenField
from .managers import FencedManager


class FencedModel(models.Model):
    """Adds ``fence_token`` and ``fence_lease``, and a manager with the fenced writes.

    A row belongs to one lease name: the first fenced write stores it, and a
    write under another name raises :class:`WrongLease`. Add a migration for the
    two columns (``makemigrations``), as for any field.
    """

    fence_token = FenceTokenField()
    fence_lease = FenceLeaseField()

    objects: ClassVar[FencedManager[Any]] = FencedManager()

    class Meta:
        abstract = True
