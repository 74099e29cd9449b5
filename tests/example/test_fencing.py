"""The fencing recipe of docs/fencing.rst and the demo's proof, run on the test database.

The example app's models are imported from ``example_project/ticks`` (they name
their app label), and their tables are created for these tests only.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from django.db import connection
from django.db.models import F
from django.test import override_settings

from django_simba import registry
from example_project.ticks.fencing import StaleToken, fenced_update, save_report
from example_project.ticks.models import Report, Tick, Ticker
from example_project.ticks.proof import prove
from tests.django.engines import reset_engine

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
SIMBA = {"BACKEND": "database", "LEASE_DURATION": 3, "RENEW_INTERVAL": 1, "METADATA": "fencing-tests"}


@pytest.fixture
def tables():
    models = (Report, Ticker, Tick)
    with connection.schema_editor() as editor:
        for model in models:
            editor.create_model(model)
    yield
    with connection.schema_editor() as editor:
        for model in models:
            editor.delete_model(model)


@pytest.fixture
def engine():
    with override_settings(SIMBA=SIMBA):
        yield registry.get_engine()
        reset_engine()


def test_the_page_shows_the_code_as_it_is():
    """Every code block of docs/fencing.rst that names a file is a verbatim excerpt of it."""
    page = (ROOT / "docs" / "fencing.rst").read_text()
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", page)
    checked = 0
    for block in blocks:
        code = textwrap.dedent(block).strip("\n")
        first, _, rest = code.partition("\n")
        if first.startswith("# example_project/"):
            source = (ROOT / first[2:].strip()).read_text()
            assert rest in source, f"docs/fencing.rst shows code that is not in {first[2:]}"
            checked += 1
    assert checked >= 2


def test_a_stale_token_is_refused_and_the_same_term_may_write_again(tables):
    save_report("daily", "term 5", 5)
    with pytest.raises(StaleToken):
        save_report("daily", "term 4, late", 4)
    save_report("daily", "term 5 again", 5)
    save_report("daily", "term 6", 6)
    with pytest.raises(StaleToken):
        save_report("daily", "term 5, late", 5)
    report = Report.objects.get(name="daily")
    assert (report.body, report.fence) == ("term 6", 6)


def test_a_taken_over_holder_cannot_write_late(tables, engine):
    lock = engine.lock("reports:daily", timeout=5)
    old = lock.acquire()
    save_report("daily", "by the first holder", old.token)
    # Its term ends behind its back (a pause past its lease, an operator), and another process takes over.
    backend = engine.backend
    assert backend.force_release("reports:daily")
    other = backend.open_session(30, "host=other pid=2").session_id
    newer = backend.acquire(other, "reports:daily")
    assert newer.token > old.token
    save_report("daily", "by the new holder", newer.token)
    # Whatever the first holder believes, its late write is refused.
    with pytest.raises(StaleToken):
        save_report("daily", "late write of the first holder", old.token)
    assert Report.objects.get(name="daily").body == "by the new holder"
    backend.close_session(other)


def test_fenced_update_evaluates_expressions_in_the_same_statement(tables):
    Ticker.objects.create(run="r1")
    for token in (1, 1, 2):
        fenced_update(Ticker.objects.filter(run="r1"), token, ticks=F("ticks") + 1)
    with pytest.raises(StaleToken):
        fenced_update(Ticker.objects.filter(run="r1"), 1, ticks=F("ticks") + 1)
    ticker = Ticker.objects.get(run="r1")
    assert (ticker.ticks, ticker.fence) == (3, 2)


def ticks(run: str, rows: list[tuple[int, int, str]], refused: int = 0) -> None:
    Ticker.objects.create(run=run, ticks=len(rows) - refused, fence=max(t for _, t, _ in rows))
    Tick.objects.bulk_create(
        Tick(run=run, period=p, token=t, worker=w, accepted=i < len(rows) - refused)
        for i, (p, t, w) in enumerate(rows)
    )


def test_the_demo_proof_holds_on_a_clean_run(tables):
    ticks("clean", [(1, 1, "w1"), (2, 1, "w1"), (6, 2, "w2"), (7, 2, "w2")])
    proof = prove("clean", killed="w1", killed_token=1, kill_period=2)
    assert proof.ok, proof.checks


@pytest.mark.parametrize(
    ("rows", "refused", "broken"),
    [
        ([(1, 1, "w1"), (2, 1, "w1"), (2, 2, "w2"), (3, 2, "w2")], 0, "no tick ran twice"),
        ([(1, 1, "w1"), (2, 2, "w2"), (3, 1, "w1"), (4, 2, "w2")], 0, "tokens never went back"),
        (
            [(1, 1, "w1"), (3, 2, "w2"), (4, 2, "w2"), (5, 1, "w1")],
            1,
            "the fenced ticker saw every tick once",
        ),
        ([(1, 1, "w1"), (2, 1, "w1"), (5, 1, "w2")], 0, "the take-over came with a higher token"),
    ],
)
def test_the_demo_proof_fails_when_it_should(tables, rows, refused, broken):
    ticks("bad", rows, refused)
    proof = prove("bad", killed="w1", killed_token=1, kill_period=2)
    assert not proof.ok
    assert broken in [check.claim for check in proof.checks if not check.ok]
