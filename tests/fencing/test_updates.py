"""``fenced_update`` and ``fenced_upsert`` on SQLite, PostgreSQL and MariaDB: what is accepted, what not."""

from __future__ import annotations

import pytest
from django.db import connections, transaction
from django.db.models import F, QuerySet, Value
from django.db.models.functions import Concat

from django_simba.fencing import Fence, StaleToken, TermEnded, WrongLease, fenced_update

from .conftest import each_alias
from .models import Book, Document, Edition, Plain, Shelf
from .terms import end, run, term

pytestmark = pytest.mark.parametrize("alias", each_alias(), indirect=True)

DAILY = "reports:daily"


def document(alias: str, key: str = "daily") -> Document:
    return Document.objects.using(alias).get(key=key)


def test_a_lower_token_is_refused_and_an_equal_one_accepted(tables: str) -> None:
    rows = Document.objects.using(tables).filter(key="daily")
    Document.objects.using(tables).create(key="daily")
    assert rows.fenced_update(Fence(DAILY, 5), body="term 5") == 1
    with pytest.raises(StaleToken) as refused:
        rows.fenced_update(Fence(DAILY, 4), body="term 4, late")
    assert (refused.value.lease, refused.value.token, refused.value.newer) == (DAILY, 4, 5)
    assert rows.fenced_update(Fence(DAILY, 5), body="term 5 again") == 1  # the same term writes again
    assert rows.fenced_update(Fence(DAILY, 6), body="term 6") == 1
    with pytest.raises(StaleToken):
        rows.fenced_update(Fence(DAILY, 5), body="term 5, late")
    row = document(tables)
    assert (row.body, row.fence_token, row.fence_lease) == ("term 6", 6, DAILY)


def test_another_lease_name_is_refused_even_with_a_higher_token(tables: str) -> None:
    rows = Document.objects.using(tables).filter(key="daily")
    Document.objects.using(tables).create(key="daily")
    rows.fenced_update(Fence(DAILY, 3), body="daily")
    with pytest.raises(WrongLease) as refused:
        rows.fenced_update(Fence("reports:weekly", 90), body="weekly")
    assert refused.value.fenced_by == DAILY
    # Names are compared byte by byte on every database (MariaDB's default collation ignores case).
    with pytest.raises(WrongLease):
        rows.fenced_update(Fence("Reports:daily", 3), body="case")
    assert document(tables).body == "daily"


def test_expressions_are_evaluated_by_the_fenced_statement(tables: str) -> None:
    rows = Document.objects.using(tables).filter(key="daily")
    Document.objects.using(tables).create(key="daily")
    for token in (1, 1, 2):
        rows.fenced_update(Fence(DAILY, token), writes=F("writes") + 1, history=Concat("history", Value("w")))
    with pytest.raises(StaleToken):
        rows.fenced_update(Fence(DAILY, 1), writes=F("writes") + 1)
    row = document(tables)
    assert (row.writes, row.history, row.fence_token) == (3, "www", 2)


def test_no_row_to_write_is_not_a_refusal(tables: str) -> None:
    assert Document.objects.using(tables).filter(key="missing").fenced_update(Fence(DAILY, 1), body="x") == 0


def test_each_row_is_fenced_on_its_own(tables: str) -> None:
    documents = Document.objects.using(tables)
    documents.bulk_create(Document(key=key) for key in ("a", "b", "c"))
    documents.filter(key="b").fenced_update(Fence(DAILY, 7), body="newer")
    # A write to all three under token 5 leaves the row that token 7 wrote alone.
    assert documents.fenced_update(Fence(DAILY, 5), body="older") == 2
    assert dict(documents.values_list("key", "body")) == {"a": "older", "b": "newer", "c": "older"}
    with pytest.raises(StaleToken):
        documents.filter(key="b").fenced_update(Fence(DAILY, 5), body="older")


def test_rows_named_through_a_relation(tables: str) -> None:
    shelf = Shelf.objects.using(tables).create(label="new")
    Book.objects.using(tables).create(shelf=shelf, title="t")
    books = Book.objects.using(tables).on_shelf("new")
    assert books.fenced_update(Fence("books", 2), title="t2") == 1
    with pytest.raises(StaleToken):
        books.fenced_update(Fence("books", 1), title="t1")
    assert Book.objects.using(tables).get().title == "t2"


def test_rows_named_through_a_relation_inside_a_transaction(tables: str) -> None:
    """Inside a transaction a write that changes nothing is looked at again with a locking read."""
    shelf = Shelf.objects.using(tables).create(label="new")
    Book.objects.using(tables).create(shelf=shelf, title="t")
    with transaction.atomic(using=tables):
        books = Book.objects.using(tables).on_shelf("new")
        assert books.fenced_update(Fence("books", 2), title="t2") == 1
        with pytest.raises(StaleToken), transaction.atomic(using=tables):
            books.fenced_update(Fence("books", 1), title="t1")
        assert Book.objects.using(tables).on_shelf("old").fenced_update(Fence("books", 2), title="e") == 0
    assert Book.objects.using(tables).get().title == "t2"


def test_rows_named_through_a_relation_where_the_table_cannot_be_read_in_its_update(
    tables: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on MySQL 8: the rows are selected first, then updated by primary key with the fence check."""
    monkeypatch.setattr(connections[tables].features, "update_can_self_select", False)
    shelf = Shelf.objects.using(tables).create(label="new")
    Book.objects.using(tables).bulk_create(Book(shelf=shelf, title=title) for title in "ab")
    books = Book.objects.using(tables).on_shelf("new")
    assert books.fenced_update(Fence("books", 2), title=Concat("title", Value("2"))) == 2
    with pytest.raises(StaleToken):
        books.fenced_update(Fence("books", 1), title=Concat("title", Value("1")))
    assert Book.objects.using(tables).on_shelf("old").fenced_update(Fence("books", 2), title="e") == 0
    assert sorted(Book.objects.using(tables).values_list("title", flat=True)) == ["a2", "b2"]


def test_an_ended_term_writes_nothing(tables: str) -> None:
    rows = Document.objects.using(tables).filter(key="daily")
    Document.objects.using(tables).create(key="daily")
    held = term(DAILY, 3)
    rows.fenced_update(held, body="while valid")
    end(held)
    with pytest.raises(TermEnded):
        rows.fenced_update(held, body="after its end")
    assert document(tables).body == "while valid"


def test_upsert_creates_then_updates_then_refuses(tables: str) -> None:
    documents = Document.objects.using(tables)
    assert documents.fenced_upsert(Fence(DAILY, 2), key="daily", defaults={"body": "created"}) is True
    assert documents.fenced_upsert(Fence(DAILY, 2), key="daily", defaults={"body": "again"}) is False
    assert documents.fenced_upsert(Fence(DAILY, 3), key="daily", defaults={"body": "newer"}) is False
    with pytest.raises(StaleToken):
        documents.fenced_upsert(Fence(DAILY, 2), key="daily", defaults={"body": "late"})
    with pytest.raises(WrongLease):
        documents.fenced_upsert(Fence("reports:weekly", 9), key="daily", defaults={"body": "other"})
    row = document(tables)
    assert (row.body, row.fence_token, row.fence_lease) == ("newer", 3, DAILY)
    assert documents.count() == 1


def test_upsert_uses_create_defaults_only_to_create(tables: str) -> None:
    documents = Document.objects.using(tables)
    fence = Fence(DAILY, 1)
    for _ in range(3):
        documents.fenced_upsert(
            fence, key="daily", defaults={"writes": F("writes") + 1}, create_defaults={"writes": 1}
        )
    assert document(tables).writes == 3


def test_upsert_by_a_unique_constraint_of_several_fields(tables: str) -> None:
    shelf = Shelf.objects.using(tables).create(label="s")
    books = Book.objects.using(tables)
    assert books.fenced_upsert(Fence("books", 1), shelf=shelf, title="t") is True
    assert books.fenced_upsert(Fence("books", 1), shelf_id=shelf.pk, title="t") is False
    assert books.count() == 1


def test_upsert_needs_a_lookup_by_a_unique_index(tables: str) -> None:
    documents = Document.objects.using(tables)
    with pytest.raises(ValueError, match="unique"):
        documents.fenced_upsert(Fence(DAILY, 1), body="not unique", defaults={"writes": 1})
    with pytest.raises(ValueError, match="unique"):
        Book.objects.using(tables).fenced_upsert(Fence("books", 1), title="half of the constraint")
    with pytest.raises(ValueError, match="field values"):
        documents.fenced_upsert(Fence(DAILY, 1), key__startswith="d")
    assert documents.count() == 0


def test_the_fence_columns_are_not_the_callers_to_write(tables: str) -> None:
    rows = Document.objects.using(tables).filter(key="daily")
    with pytest.raises(ValueError, match="fencing API only"):
        rows.fenced_update(Fence(DAILY, 1), fence_token=99)
    with pytest.raises(ValueError, match="no field"):
        rows.fenced_update(Fence(DAILY, 1), colour="red")


def test_models_without_their_own_fence_columns_are_refused(tables: str) -> None:
    with pytest.raises(TypeError, match="FencedModel"):
        fenced_update(Plain.objects.using(tables).all(), Fence(DAILY, 1), key="x")
    # A child of a fenced model: Django would write its own columns with a second, unfenced UPDATE.
    with pytest.raises(TypeError, match="own table"):
        Edition.objects.using(tables).fenced_update(Fence(DAILY, 1), isbn="1")


def test_the_async_twins(tables: str) -> None:
    run(the_async_twins(Document.objects.using(tables)))


async def the_async_twins(documents: QuerySet[Document]) -> None:
    assert await documents.afenced_upsert(Fence(DAILY, 4), key="daily", defaults={"body": "a"}) is True
    assert await documents.filter(key="daily").afenced_update(Fence(DAILY, 4), body="b") == 1
    with pytest.raises(StaleToken):
        await documents.filter(key="daily").afenced_update(Fence(DAILY, 3), body="late")
    with pytest.raises(StaleToken):
        await documents.afenced_upsert(Fence(DAILY, 3), key="daily", defaults={"body": "late"})
    row = await documents.aget(key="daily")
    assert (row.body, row.fence_token) == ("b", 4)
