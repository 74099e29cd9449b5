"""A user's project tested the way the documentation says (docs/testing.rst), in a child pytest.

``tests/usersuite/project`` is a small shop: settings as README.rst tells a user to write them,
code that takes fenced locks and runs singleton tasks, and a pytest-django suite over it (with
and without ``django_db``, ``transaction=True``, ``atomic()`` blocks, another real process).
Each case runs that suite as a user would (``python -m pytest`` in the project, the plugin
loaded by its entry point), on SQLite and PostgreSQL, with the database backend and with the
memory backend of the one-line test setting, and checks what it reports. The SQLite run uses
pytest-xdist workers. The real databases are never created: the suite must touch only its test
databases.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends.database.conftest import reachable
from tests.conftest import server_missing

PROJECT = Path(__file__).parent / "project"
#: A generous bound for one child run on a busy 2-core machine (it takes well under a minute).
DEADLINE = 900

#: Tests of the shop's suite: check_startup 2, check_fixtures 2, check_locks 7, check_processes 4.
TOTAL = 15


def run_suite(
    tmp_path: Path, environ: dict[str, str], *arguments: str, target: str = "."
) -> tuple[dict[str, int], str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "DJANGO_"))}
    env.update(environ, SHOP_DIR=str(tmp_path))
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", target, "-q", *arguments],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    output = completed.stdout + completed.stderr
    counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?)\b", output)}
    assert completed.returncode == 0, output[-6000:]
    return counts, output


def test_sqlite_with_the_database_backend_under_xdist(tmp_path: Path) -> None:
    counts, output = run_suite(tmp_path, {"SHOP_DB": "sqlite", "SHOP_SIMBA": "database"}, "-n", "2")
    assert counts == {"passed": TOTAL - 1, "skipped": 1}, output[-3000:]
    # Nothing ever opened the real files (the test databases are test_simba.sqlite3_gw0 ...).
    assert not (tmp_path / "db.sqlite3").exists()
    assert not (tmp_path / "simba.sqlite3").exists()


@pytest.mark.postgresql
def test_postgresql_with_the_database_backend(tmp_path: Path) -> None:
    if not reachable("postgresql"):
        server_missing("PostgreSQL")
    # A real database that does not exist: any connection to it would fail the run.
    name = f"{os.environ.get('SIMBA_PG_NAME', 'test')}_shop_{os.getpid()}"
    counts, output = run_suite(
        tmp_path, {"SHOP_DB": "postgresql", "SHOP_PG_NAME": name, "SHOP_SIMBA": "database"}
    )
    assert counts == {"passed": TOTAL - 1, "skipped": 1}, output[-3000:]


def test_sqlite_with_the_default_settings(tmp_path: Path) -> None:
    """One SQLite file, no router: in tests, django-simba's tables sit in pytest-django's in-memory
    database beside the shop's, and a lock after the test's write fails with the error that names
    the fix, never with a locked table or a session that could not be opened."""
    counts, output = run_suite(
        tmp_path, {"SHOP_DB": "sqlite-default", "SHOP_SIMBA": "database"}, target="default_sqlite_suite.py"
    )
    assert counts == {"passed": 6}, output[-3000:]
    for symptom in ("table is locked", "database is locked", "no session could be opened"):
        assert symptom not in output, output[-3000:]
    assert not (tmp_path / "db.sqlite3").exists()  # the tests used the in-memory database only


def test_sqlite_with_the_memory_backend_under_xdist(tmp_path: Path) -> None:
    counts, output = run_suite(tmp_path, {"SHOP_DB": "sqlite", "SHOP_SIMBA": "memory"}, "-n", "2")
    assert counts == {"passed": TOTAL - 3, "skipped": 3}, output[-3000:]
    assert not (tmp_path / "simba.sqlite3").exists()
