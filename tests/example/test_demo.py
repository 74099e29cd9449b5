"""The README's main job: ``python example_project/manage.py simba_demo`` end to end, with no server."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import server_missing

ROOT = Path(__file__).resolve().parents[2]
MANAGE = ROOT / "example_project" / "manage.py"


def run_demo(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("SIMBA_EXAMPLE_", "DJANGO_SETTINGS"))}
    environ.pop("PYTEST_CURRENT_TEST", None)
    environ.update(SIMBA_EXAMPLE_SQLITE=str(tmp_path / "demo.sqlite3"), **env)
    # From another directory, as a user would after ``pip install -e .``.
    return subprocess.run(
        [sys.executable, str(MANAGE), "simba_demo", *args],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


REDIS_URL = os.environ.get("SIMBA_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture(params=["database", pytest.param("redis", marks=pytest.mark.redis)])
def backend_env(request):
    """The demo's environment for one backend (the ticks are always in the SQLite file)."""
    if request.param == "database":
        yield {}
        return
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.RedisError:
        server_missing("Redis")
    yield {"SIMBA_EXAMPLE_BACKEND": "redis", "SIMBA_EXAMPLE_REDIS_URL": REDIS_URL}
    for key in client.scan_iter("simba:*demo.ticker*"):
        client.delete(key)


@pytest.mark.slow
def test_demo_shows_a_take_over_and_proves_no_tick_ran_twice(tmp_path, backend_env):
    result = run_demo(tmp_path, **backend_env)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    first = re.search(r"leader: (worker-\d), token (\d+)\n", out)
    killed = re.search(r"SIGKILL -> (worker-\d) \(pid \d+\), the leader, token (\d+)", out)
    takeover = re.search(r"take-over: (worker-\d) leads with token (\d+) \(was (\d+)\)", out)
    assert first and killed and takeover, out
    assert killed.groups() == first.groups()
    assert takeover.group(1) != killed.group(1)
    assert int(takeover.group(2)) > int(takeover.group(3)) == int(killed.group(2))
    assert f"backend {backend_env.get('SIMBA_EXAMPLE_BACKEND', 'database')} on sqlite" in out
    summary = out[out.index("Summary") :]
    assert summary.count(" ok ") == 4 and "FAIL" not in summary and "PROOF OK" in summary

    # Checked again here, straight from the demo's database, without the demo's own code.
    db = sqlite3.connect(tmp_path / "demo.sqlite3")
    [(run,)] = db.execute("SELECT run FROM ticks_ticker").fetchall()
    rows = db.execute(
        "SELECT period, token, worker, accepted FROM ticks_tick WHERE run = ? ORDER BY period, id", (run,)
    ).fetchall()
    periods = [period for period, *_ in rows]
    assert len(periods) == len(set(periods)) >= 12, rows  # no tick ran twice
    tokens = [token for _, token, *_ in rows]
    assert tokens == sorted(tokens) and len(set(tokens)) == 2  # one take-over, tokens only forward
    assert all(accepted for *_, accepted in rows)
    assert {worker for _, token, worker, _ in rows if token == tokens[0]} == {killed.group(1)}
    [(ticks, fence)] = db.execute("SELECT ticks, fence_token FROM ticks_ticker").fetchall()
    assert (ticks, fence) == (len(rows), tokens[-1])


def test_demo_rejects_impossible_settings(tmp_path):
    result = run_demo(tmp_path, "--lease", "1", "--renew", "0.9")
    assert result.returncode == 1 and "at most half the lease" in result.stderr
