"""The tiers of the suite (tests/tiers.py): each test in one, and a fast run with the test extra alone."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests import tiers

ROOT = Path(__file__).resolve().parents[1]

#: What only the test-integration extra installs (the compiled drivers, the browser, the workers).
INTEGRATION_ONLY = ("psycopg", "psycopg2", "MySQLdb", "selenium", "rq", "uvicorn", "django_tasks_db", "uwsgi")

#: ``python -m pytest ARGS`` in a process where the packages above are absent (None in
#: sys.modules: an import of one fails, and find_spec finds nothing).
WITHOUT_INTEGRATION_PACKAGES = f"""
import sys
sys.modules.update(dict.fromkeys({INTEGRATION_ONLY!r}))
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""
PYTEST = "import sys, pytest; sys.exit(pytest.main(sys.argv[1:]))"


def pytest_run(*arguments: str, blocked: bool = False) -> subprocess.CompletedProcess[str]:
    """A pytest run of its own: its SQLite test databases are its own, not this run's."""
    code = WITHOUT_INTEGRATION_PACKAGES if blocked else PYTEST
    environ = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    environ["SIMBA_TEST_RUN_ID"] = f"tiers-{uuid.uuid4().hex[:12]}"
    return subprocess.run(
        [sys.executable, "-c", code, "-q", "-p", "no:cacheprovider", *arguments],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def collect(*arguments: str, blocked: bool = False) -> subprocess.CompletedProcess[str]:
    return pytest_run("--collect-only", *arguments, blocked=blocked)


def fast_run_without_them(*arguments: str) -> subprocess.CompletedProcess[str]:
    """A fast run of ``arguments`` without the packages of the test-integration extra."""
    return pytest_run("-m", "fast", *arguments, blocked=True)


def test_every_test_of_this_run_is_in_exactly_one_tier(request: pytest.FixtureRequest) -> None:
    for item in request.session.items:
        assert [name for name in tiers.TIERS if item.get_closest_marker(name)] in (["fast"], ["integration"])


def test_a_fast_run_collects_without_the_packages_of_the_integration_extra() -> None:
    fast = collect("-m", "fast", blocked=True)
    assert fast.returncode == 0, fast.stdout[-3000:] + fast.stderr[-3000:]
    selected = [line for line in fast.stdout.splitlines() if "::" in line]
    paths = {ROOT / line.split("::")[0] for line in selected}
    assert paths and not any(tiers._under(path, tiers.INTEGRATION_PATHS) for path in paths)
    assert any(line.startswith("tests/engine/") for line in selected)
    assert any("[sqlite]" in line for line in selected)
    assert not any("[postgresql]" in line or "[mysql]" in line for line in selected)
    assert not any(line.startswith("tests/simulation/test_simulation.py::test_no_seed") for line in selected)


def test_a_fast_test_on_the_test_databases_runs_without_the_packages_of_the_integration_extra() -> None:
    # The test databases of every alias in settings are set up: an alias whose driver is absent
    # made that setup fail ("import of psycopg halted").
    ran = fast_run_without_them("tests/django/test_admin.py::test_admin_is_read_only")
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "1 passed" in ran.stdout


def test_tests_that_use_a_server_fixture_or_database_are_in_the_full_tier() -> None:
    found = collect("-m", "fast", "tests/django/test_checks.py", "tests/django/test_task_runners.py")
    assert found.returncode == 0, found.stdout[-3000:] + found.stderr[-3000:]
    assert "test_deploy_check_passes_when_the_backend_answers" not in found.stdout  # redis_server
    assert "test_rq_job_runs_under_the_lock_only" not in found.stdout  # redis_url
    # django_db(databases="__all__"): every alias, the servers' too where their drivers import
    assert "test_manage_py_check_fails_on_a_bad_setting" not in found.stdout
    assert "test_invalid_settings_are_reported_with_ids_and_hints" in found.stdout


@pytest.mark.parametrize(
    ("expression", "may"),
    [
        ("fast", False),
        ("not integration", False),
        ("fast and not slow", False),
        ("fast or (redis and not zookeeper)", True),
        ("fast or django_version", True),
        ("integration", True),
        ("not fast", True),
        ("zookeeper", True),
    ],
)
def test_only_expressions_that_cannot_select_an_integration_test_skip_its_modules(
    expression: str, may: bool
) -> None:
    assert tiers._may_select_integration(expression) is may


def test_the_tier_markers_are_not_written_on_tests(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems\n")
    (tmp_path / "test_written.py").write_text("import pytest\n\n@pytest.mark.fast\ndef test_x():\n    pass\n")
    found = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:django"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode != 0
    assert "do not write its marker" in found.stdout + found.stderr
