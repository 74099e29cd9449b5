"""The fenced writes: one conditional ``UPDATE``, and an upsert built on it and on a unique index.

A row may be written under a term when the row's fence holds no newer token of
the same lease name: ``fence_token <= token AND fence_lease IN (name, '')``
(a row never fenced has token 0 and no name). The check is part of the
``UPDATE`` statement itself, so the database applies check and write
atomically, on every database, without ``SELECT ... FOR UPDATE``; the row count
says whether the write was accepted. Reads happen only after a write that
changed nothing, to say why (a locking one too inside a transaction, since
the transaction's snapshot may be older than what the ``UPDATE`` saw).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.core.exceptions import FieldDoesNotExist
from django.db import IntegrityError, connections, router, transaction
from django.db.models import Model, Q, QuerySet

from ..errors import StaleToken, WrongLease
from .section import term_for_write
from .tokens import Fenceable

M = TypeVar("M", bound=Model)

TOKEN_FIELD = "fence_token"
LEASE_FIELD = "fence_lease"

# Rounds of an upsert: a creation race takes two (update, insert refused by the unique index, update
# again); the third is for a row deleted in between.
_UPSERT_ROUNDS = 3


def fenced_update(rows: QuerySet[M], term: Fenceable | None = None, /, **values: Any) -> int:
    """``UPDATE`` the rows with ``values`` unless a newer term of the lease wrote them; the count written.

    ``term`` defaults to the one of the enclosing ``fenced()`` block. Every row
    is fenced on its own: rows a newer term wrote are left alone. When no row
    is written, :class:`StaleToken` (or :class:`WrongLease`) is raised if the
    rows exist, and 0 is returned if there are none. ``values`` may hold
    expressions (``F("n") + 1``), evaluated by the same statement.
    """
    fence = term_for_write(term)
    check_fenced_model(rows.model)
    _check_values(rows.model, values)
    rows = rows.using(write_alias(rows))
    written = _write(rows, fence, values)
    if written == 0:
        _raise_if_refused(rows, fence)
    return written


def fenced_upsert(
    rows: QuerySet[M],
    term: Fenceable | None = None,
    /,
    *,
    defaults: Mapping[str, Any] | None = None,
    create_defaults: Mapping[str, Any] | None = None,
    **lookup: Any,
) -> bool:
    """Write ``defaults`` to the row that ``lookup`` names, or create it; True when it was created.

    ``lookup`` must name the row by a unique field or unique constraint, so
    that two writers racing to create it cannot both succeed: the one refused
    by the unique index then goes through the conditional update, which
    compares the tokens. A new row gets ``lookup``, ``create_defaults`` (default:
    ``defaults``) and the term's fence. Raises :class:`StaleToken` when a newer
    term wrote the row, :class:`WrongLease` when another lease name fences it.
    """
    fence = term_for_write(term)
    model = rows.model
    check_fenced_model(model)
    updates = dict(defaults or {})
    creates = dict(updates if create_defaults is None else create_defaults)
    _check_values(model, updates)
    _check_values(model, creates)
    _check_unique_lookup(model, lookup)
    alias = write_alias(rows)
    target = rows.using(alias).filter(**lookup)
    for round_ in range(_UPSERT_ROUNDS):
        if _write(target, fence, updates):
            return False
        _raise_if_refused(target, fence)
        # No row refuses the fence: it is missing (or appeared since, and the update decides again).
        try:
            with transaction.atomic(using=alias):
                row = model(**lookup, **creates, **{TOKEN_FIELD: fence.token, LEASE_FIELD: fence.name})
                row.save(force_insert=True, using=alias)
        except IntegrityError:
            # Another writer created it first: the update decides. If that keeps happening, this
            # transaction cannot see rows committed after it began (REPEATABLE READ, SERIALIZABLE).
            if round_ == _UPSERT_ROUNDS - 1:
                raise
            continue
        return True
    raise AssertionError("unreachable: the last round returns or raises")


async def afenced_update(rows: QuerySet[M], term: Fenceable | None = None, /, **values: Any) -> int:
    """:func:`fenced_update` for async code (on Django's thread for database work, like ``aupdate``)."""
    return await sync_to_async(fenced_update)(rows, term, **values)


async def afenced_upsert(
    rows: QuerySet[M],
    term: Fenceable | None = None,
    /,
    *,
    defaults: Mapping[str, Any] | None = None,
    create_defaults: Mapping[str, Any] | None = None,
    **lookup: Any,
) -> bool:
    """:func:`fenced_upsert` for async code."""
    return await sync_to_async(fenced_upsert)(
        rows, term, defaults=defaults, create_defaults=create_defaults, **lookup
    )


def write_alias(rows: QuerySet[Any]) -> str:
    """The database ``rows.update()`` would write to: the queryset's ``using()``, else the router's."""
    chosen: str | None = getattr(rows, "_db", None)
    return chosen or router.db_for_write(rows.model, **getattr(rows, "_hints", {}))


def _writable(fence: Fenceable) -> Q:
    return Q(**{f"{TOKEN_FIELD}__lte": fence.token, f"{LEASE_FIELD}__in": (fence.name, "")})


def _write(rows: QuerySet[Any], fence: Fenceable, values: Mapping[str, Any]) -> int:
    """The one conditional UPDATE, with the fence compared on the written table itself."""
    return (
        rows_of_own_table(rows)
        .filter(_writable(fence))
        .update(**values, **{TOKEN_FIELD: fence.token, LEASE_FIELD: fence.name})
    )


def rows_of_own_table(rows: QuerySet[M]) -> QuerySet[M]:
    """``rows`` as a filter on the table's own columns, so the fence check stays on the written row.

    Given a filter through a join, Django moves every condition of an UPDATE into
    a subquery (or a prior SELECT on MySQL), where a concurrent write is not
    re-checked; naming the rows by primary key keeps the fence condition on the
    target table.
    """
    query = rows.query.chain()
    query.get_initial_alias()
    if query.count_active_tables() == 1:
        return rows
    alias = write_alias(rows)
    own = rows.model._base_manager.using(alias)
    keys = rows.values_list("pk", flat=True)
    if not connections[alias].features.update_can_self_select:
        return own.filter(pk__in=list(keys))  # MySQL cannot read the table it updates
    return own.filter(pk__in=keys)


def _raise_if_refused(rows: QuerySet[Any], fence: Fenceable) -> None:
    """After a write that changed nothing: raise why, if one of the rows refuses the fence.

    A plain read sees the transaction's snapshot. Under REPEATABLE READ that may be older than
    what the UPDATE read (MySQL's UPDATE reads the latest committed rows, its SELECT the
    snapshot): a row a newer term wrote, or created, since the snapshot refuses the UPDATE while
    the snapshot shows it writable, or not at all. So inside a transaction, when the snapshot
    shows no refusal, a locking read, which reads the latest rows, has the last word. It locks
    nothing the UPDATE did not: it returns only refusing rows (none on PostgreSQL, whose UPDATE
    and SELECT read the same snapshot), and InnoDB's UPDATE locked the rows it scanned.
    """
    _raise_for(_refusing(rows, fence), fence)
    features = (connection := connections[write_alias(rows)]).features
    if features.has_select_for_update and not connection.get_autocommit():
        of = ("self",) if features.has_select_for_update_of else ()  # not a joined table's rows
        _raise_for(_refusing(rows.select_for_update(of=of), fence), fence)


def _refusing(rows: QuerySet[Any], fence: Fenceable) -> list[tuple[str, int]]:
    """The fence of the row that refuses ``fence`` with the newest token, if any (one row at most)."""
    refusing = rows.exclude(_writable(fence)).order_by(f"-{TOKEN_FIELD}")
    return list(refusing.values_list(LEASE_FIELD, TOKEN_FIELD)[:1])


def _raise_for(refusing: list[tuple[str, int]], fence: Fenceable) -> None:
    for lease, token in refusing:
        if lease not in (fence.name, ""):
            raise WrongLease(fence.name, lease)
        raise StaleToken(fence.name, fence.token, token)


def check_fenced_model(model: type[Model]) -> None:
    """Check that ``model`` has the fence columns in its own table (``FencedModel`` gives them)."""
    meta = model._meta
    for name in (TOKEN_FIELD, LEASE_FIELD):
        try:
            field = meta.get_field(name)
        except FieldDoesNotExist:
            raise TypeError(
                f"{model.__name__} has no {name!r} field: derive it from django_simba.fencing.FencedModel"
            ) from None
        owner = getattr(field, "model", None)
        if owner is None or owner._meta.concrete_model is not meta.concrete_model:
            raise TypeError(f"{model.__name__}.{name} must be a column of its own table, not of a parent's")


def _check_values(model: type[Model], values: Mapping[str, Any]) -> None:
    for name in values:
        if name in (TOKEN_FIELD, LEASE_FIELD):
            raise ValueError(f"{name!r} is written by the fencing API only, from the term")
        try:
            field = model._meta.get_field(name)
        except FieldDoesNotExist:
            raise ValueError(f"{model.__name__} has no field {name!r}") from None
        owner = getattr(field, "model", None)
        if owner is None or owner._meta.concrete_model is not model._meta.concrete_model:
            # Django would write it with a second UPDATE of the parent's table, outside the fence check.
            raise ValueError(f"{name!r} is not a column of {model.__name__}'s own table: it cannot be fenced")


def _check_unique_lookup(model: type[Model], lookup: Mapping[str, Any]) -> None:
    """``lookup`` must name at most one row through a unique index, or two creators could both insert."""
    meta = model._meta
    named: set[str] = set()
    for key, value in lookup.items():
        if key in (TOKEN_FIELD, LEASE_FIELD):
            raise ValueError(f"{key!r} is written by the fencing API only, from the term")
        try:
            field = meta.pk if key == "pk" else meta.get_field(key)
        except FieldDoesNotExist:
            raise ValueError(
                f"fenced_upsert names its row by field values; {key!r} is not a field of {model.__name__}"
            ) from None
        if field is not None and value is not None:  # NULLs do not collide in a unique index
            named.add(field.name)
    unique_sets = [{field.name} for field in meta.concrete_fields if field.unique]
    unique_sets += [set(fields) for fields in meta.unique_together]
    unique_sets += [set(constraint.fields) for constraint in meta.total_unique_constraints]
    if not any(unique <= named for unique in unique_sets):
        raise ValueError(
            f"fenced_upsert must name the row of {model.__name__} by a unique field or unique constraint "
            f"(got {sorted(lookup)}): otherwise two writers could both create it"
        )
