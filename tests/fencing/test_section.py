"""``with fenced(term):``: the block's term for the fenced writes, and refusal once the term is over."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction

from django_simba import SimbaError
from django_simba.fencing import (
    Fence,
    StaleToken,
    TermEnded,
    fenced,
    fenced_update,
    section_term,
)
from django_simba.fencing.section import _is_write
from django_simba.spi import LeaseNotHeld

from .conftest import each_alias
from .models import Document
from .terms import Clock, end, run, term

DAILY = "reports:daily"
each_database = pytest.mark.parametrize("alias", each_alias(), indirect=True)
on_sqlite = pytest.mark.parametrize("alias", each_alias()[:1], indirect=True)


@on_sqlite
def test_fenced_writes_in_the_block_take_its_term(tables: str) -> None:
    Document.objects.using(tables).create(key="daily")
    held = term(DAILY, 4)
    assert section_term() is None
    with fenced(held) as section:
        assert section is held and section_term() is held
        Document.objects.using(tables).filter(key="daily").fenced_update(body="in the block")
        Document.objects.using(tables).fenced_upsert(key="weekly", defaults={"body": "created"})
    assert section_term() is None
    assert set(Document.objects.using(tables).values_list("fence_token", "fence_lease")) == {(4, DAILY)}


@on_sqlite
def test_a_term_passed_to_a_write_wins_over_the_blocks(tables: str) -> None:
    Document.objects.using(tables).create(key="daily")
    with fenced(term(DAILY, 4)), fenced(term(DAILY, 5)):
        inner = section_term()
        assert inner is not None and inner.token == 5
        Document.objects.using(tables).filter(key="daily").fenced_update(Fence(DAILY, 6), body="x")
    assert Document.objects.using(tables).get().fence_token == 6


@on_sqlite
def test_without_a_term_a_fenced_write_is_refused_before_any_io(tables: str) -> None:
    with pytest.raises(LeaseNotHeld, match="needs a term"):
        Document.objects.using(tables).fenced_upsert(key="daily", defaults={"body": "x"})
    assert not Document.objects.using(tables).exists()


def test_entering_without_a_term_is_refused() -> None:
    with pytest.raises(LeaseNotHeld), fenced(term(DAILY, 4)), fenced(None):
        pytest.fail("the block ran")


def test_entering_with_an_ended_term_is_refused() -> None:
    held = term(DAILY, 4)
    end(held)
    with pytest.raises(TermEnded), fenced(held):
        pytest.fail("the block ran")


@each_database
@pytest.mark.parametrize("written_after_the_end", [True, False], ids=["a-write-after-the-end", "none-after"])
def test_a_transaction_whose_term_ends_inside_rolls_back(tables: str, written_after_the_end: bool) -> None:
    documents = Document.objects.using(tables)
    clock = Clock()
    held = term(DAILY, 4, clock, lasts=10)
    when = "this statement" if written_after_the_end else "the end of its fenced section"
    with pytest.raises(TermEnded, match=when), transaction.atomic(using=tables), fenced(held):  # noqa: PT012
        documents.fenced_upsert(key="fenced, while valid", defaults={"body": "x"})
        documents.create(key="plain, while valid")
        clock.now = 10.0  # the local deadline passes: a pause, lost keep-alives
        assert documents.count() == 2  # reads go on
        if written_after_the_end:
            with transaction.atomic(using=tables):  # a savepoint, rolled back through the connection
                documents.create(key="after its end")
    assert not documents.exists()


@on_sqlite
def test_only_the_named_databases_are_checked(tables: str) -> None:
    clock = Clock()
    held = term(DAILY, 4, clock, lasts=10)
    with pytest.raises(TermEnded, match="end of its fenced section"), fenced(held, using="default"):  # noqa: PT012
        clock.now = 10.0
        Document.objects.using(tables).create(key="on another alias")
    assert Document.objects.using(tables).count() == 1


@on_sqlite
def test_a_thread_started_in_the_block_is_not_in_it(tables: str) -> None:
    """Documented limit: the block's term follows the code's context, and a new thread starts without it."""
    errors: list[BaseException] = []

    def write() -> None:
        try:
            fenced_update(Document.objects.using(tables).all(), body="x")
        except BaseException as error:
            errors.append(error)

    with fenced(term(DAILY, 4)):
        thread = threading.Thread(target=write)
        thread.start()
        thread.join(10)
    assert len(errors) == 1 and isinstance(errors[0], LeaseNotHeld)


@on_sqlite
def test_async_code_in_the_block_writes_with_its_term(tables: str) -> None:
    documents = Document.objects.using(tables)

    async def section() -> None:
        held = term(DAILY, 4)
        with fenced(held):
            assert await documents.afenced_upsert(key="daily", defaults={"body": "a"}) is True
            assert await documents.filter(key="daily").afenced_update(body="b") == 1
            end(held)
            with pytest.raises(TermEnded):
                await documents.filter(key="daily").afenced_update(body="after its end")

    with pytest.raises(TermEnded, match="end of its fenced section"):
        run(section())
    assert documents.get().body == "b"


@on_sqlite
def test_in_async_code_plain_writes_are_not_checked(tables: str) -> None:
    """Documented limit: the async ORM sends its queries from another thread, which the block does not see."""
    documents = Document.objects.using(tables)

    async def section() -> None:
        held = term(DAILY, 4)
        with fenced(held):
            end(held)
            await documents.acreate(key="plain, after the end")

    with pytest.raises(TermEnded, match="end of its fenced section"):
        run(section())
    assert documents.filter(key="plain, after the end").exists()


def test_refusals_are_simba_errors() -> None:
    assert issubclass(TermEnded, StaleToken) and issubclass(StaleToken, SimbaError)


@pytest.mark.parametrize(
    ("sql", "writes"),
    [
        ('INSERT INTO "t" VALUES (1)', True),
        ("  update t set a = 1", True),
        ("DELETE FROM t", True),
        ("REPLACE INTO t VALUES (1)", True),
        ("(SELECT 1) UNION (SELECT 2)", False),
        ("SELECT 1", False),
        ('SAVEPOINT "s1"', False),
        ('ROLLBACK TO SAVEPOINT "s1"', False),
        ('RELEASE SAVEPOINT "s1"', False),
        ("", False),
    ],
)
def test_which_statements_count_as_writes(sql: str, writes: bool) -> None:
    assert _is_write(sql) is writes
