"""The example project's fenced code (shown by docs/fencing.rst) and the demo's proof, on the test database.

The example app's models are imported from ``example_project/ticks`` (they name
their app label), and their tables are created for these tests only. The
commands run in the example project itself, on a SQLite file of their own.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.db import connection
from django.test import override_settings

from django_simba import StaleToken, registry
from django_simba.fencing import Fence
from example_project.ticks.jobs import JOB, tick
from example_project.ticks.models import Report, Tick, Ticker
from example_project.ticks.proof import prove
from example_project.ticks.reports import asave_report, save_report
from tests.django.engines import reset_engine

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
MANAGE = ROOT / "example_project" / "manage.py"
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


def manage(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py`` of the example project, on a SQLite file in ``tmp_path``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("SIMBA_EXAMPLE_", "DJANGO_SETTINGS"))}
    environ.pop("PYTEST_CURRENT_TEST", None)
    environ["SIMBA_EXAMPLE_SQLITE"] = str(tmp_path / "demo.sqlite3")
    return subprocess.run(
        [sys.executable, str(MANAGE), *args],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_page_shows_the_code_as_it_is():
    """Every code block of docs/fencing.rst that names a file is a verbatim excerpt of it."""
    page = (ROOT / "docs" / "fencing.rst").read_text()
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", page)
    checked = set()
    for block in blocks:
        code = textwrap.dedent(block).strip("\n")
        first, _, rest = code.partition("\n")
        if first.startswith("# example_project/"):
            source = (ROOT / first[2:].strip()).read_text()
            assert rest in source, f"docs/fencing.rst shows code that is not in {first[2:]}"
            checked.add(first[2:])
    assert len(checked) == 5, checked


def test_the_example_projects_migrations_match_its_models(tmp_path):
    result = manage(tmp_path, "makemigrations", "--check", "--dry-run", "ticks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_stale_token_is_refused_and_the_same_term_may_write_again(tables):
    assert save_report("daily", "term 5", Fence("reports:daily", 5)) is True
    with pytest.raises(StaleToken):
        save_report("daily", "term 4, late", Fence("reports:daily", 4))
    assert save_report("daily", "term 5 again", Fence("reports:daily", 5)) is False
    save_report("daily", "term 6", Fence("reports:daily", 6))
    with pytest.raises(StaleToken):
        save_report("daily", "term 5, late", Fence("reports:daily", 5))
    report = Report.objects.get(name="daily")
    assert (report.body, report.fence_token, report.fence_lease) == ("term 6", 6, "reports:daily")


def test_a_taken_over_holder_cannot_write_late(tables, engine):
    lock = engine.lock("reports:daily", timeout=5)
    old = lock.acquire()
    save_report("daily", "by the first holder", old)
    # Its term ends behind its back (a pause past its lease, an operator), and another process takes over.
    backend = engine.backend
    assert backend.force_release("reports:daily")
    other = backend.open_session(30, "host=other pid=2").session_id
    newer = backend.acquire(other, "reports:daily")
    assert newer.token > old.token
    save_report("daily", "by the new holder", Fence("reports:daily", newer.token))
    # Whatever the first holder believes, its late write is refused (by the database, or at once here
    # if its engine already learnt that the term is over).
    with pytest.raises(StaleToken):
        save_report("daily", "late write of the first holder", old)
    with pytest.raises(StaleToken):
        save_report("daily", "late write of the first holder", Fence("reports:daily", old.token))
    assert Report.objects.get(name="daily").body == "by the new holder"
    backend.close_session(other)


def test_the_async_twin(tables):
    async def save() -> tuple[bool, bool]:
        return (
            await asave_report("daily", "a", Fence("reports:daily", 2)),
            await asave_report("daily", "b", Fence("reports:daily", 2)),
        )

    assert asyncio.run(save()) == (True, False)
    with pytest.raises(StaleToken):
        asyncio.run(asave_report("daily", "late", Fence("reports:daily", 1)))
    assert Report.objects.get(name="daily").body == "b"


def test_the_job_counts_under_its_term_and_records_a_refusal(tables, engine):
    Ticker.objects.create(run="r1")
    assert tick("r1", 1, "w1") is True
    assert tick("r1", 2, "w1") is True
    ticker = Ticker.objects.get(run="r1")
    assert (ticker.ticks, ticker.fence_lease) == (2, JOB)
    # A newer term of the job wrote the ticker (this process's term was superseded): refused, and recorded.
    Ticker.objects.filter(run="r1").update(fence_token=ticker.fence_token + 1)
    assert tick("r1", 3, "w1") is False
    assert Ticker.objects.get(run="r1").ticks == 2
    assert list(Tick.objects.filter(run="r1").values_list("period", "accepted")) == [
        (1, True),
        (2, True),
        (3, False),
    ]


def test_a_command_run_by_simba_run_writes_with_its_token(tmp_path):
    assert manage(tmp_path, "migrate", "-v0").returncode == 0
    run = ("simba_run", "--lock", "reports:daily", "--manage", "publish_report", "daily")
    first = manage(tmp_path, *run, "first")
    assert first.returncode == 0 and "created daily with token 1" in first.stdout, first.stdout + first.stderr
    second = manage(tmp_path, *run, "second")
    assert second.returncode == 0 and "updated daily with token 2" in second.stdout, second.stderr
    # Not under simba_run: no term, nothing written.
    alone = manage(tmp_path, "publish_report", "daily", "alone")
    assert alone.returncode != 0 and "simba_run" in alone.stderr


def ticks(run: str, rows: list[tuple[int, int, str]], refused: int = 0) -> None:
    Ticker.objects.create(run=run, ticks=len(rows) - refused, fence_token=max(t for _, t, _ in rows))
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
