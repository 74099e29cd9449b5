"""The fenced writes as methods of querysets and managers: ``Report.objects.filter(...).fenced_update()``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from django.db import models

from . import updates
from .tokens import Fenceable

M = TypeVar("M", bound=models.Model)


class FencedWrites(Generic[M]):
    """The fenced writes, on the rows of a queryset or of a manager (see :mod:`.updates`)."""

    def fenced_rows(self) -> models.QuerySet[M]:
        raise NotImplementedError

    def fenced_update(self, term: Fenceable | None = None, /, **values: Any) -> int:
        """:func:`~django_simba.fencing.fenced_update` on these rows."""
        return updates.fenced_update(self.fenced_rows(), term, **values)

    async def afenced_update(self, term: Fenceable | None = None, /, **values: Any) -> int:
        """:func:`~django_simba.fencing.afenced_update` on these rows."""
        return await updates.afenced_update(self.fenced_rows(), term, **values)

    def fenced_upsert(
        self,
        term: Fenceable | None = None,
        /,
        *,
        defaults: Mapping[str, Any] | None = None,
        create_defaults: Mapping[str, Any] | None = None,
        **lookup: Any,
    ) -> bool:
        """:func:`~django_simba.fencing.fenced_upsert` on these rows."""
        rows = self.fenced_rows()
        return updates.fenced_upsert(rows, term, defaults=defaults, create_defaults=create_defaults, **lookup)

    async def afenced_upsert(
        self,
        term: Fenceable | None = None,
        /,
        *,
        defaults: Mapping[str, Any] | None = None,
        create_defaults: Mapping[str, Any] | None = None,
        **lookup: Any,
    ) -> bool:
        """:func:`~django_simba.fencing.afenced_upsert` on these rows."""
        rows = self.fenced_rows()
        return await updates.afenced_upsert(
            rows, term, defaults=defaults, create_defaults=create_defaults, **lookup
        )


class FencedQuerySet(FencedWrites[M], models.QuerySet[M]):
    """A queryset with the fenced writes; base your own queryset on it."""

    def fenced_rows(self) -> models.QuerySet[M]:
        return self


class FencedManager(FencedWrites[M], models.Manager[M]):
    """The manager of :class:`FencedModel`: fenced writes, and querysets that have them too."""

    def fenced_rows(self) -> models.QuerySet[M]:
        return self.get_queryset()

    def get_queryset(self) -> FencedQuerySet[M]:
        return FencedQuerySet(self.model, using=self._db, hints=getattr(self, "_hints", None))
