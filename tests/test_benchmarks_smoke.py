"""The benchmark harness runs end to end (quickest mode, memory backend) and reports every scenario.

Timings are never asserted: only that each scenario produced its rows, that the
contention check saw no overlap, and that the JSON carries what the table shows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("bench") / "smoke.json"
    finished = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--smoke", "--only", "memory", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    return json.loads(out.read_text()), finished.stdout


def parallel_rows(data: dict) -> list[dict]:
    """The parallel-names rows of the memory backend (one per N)."""
    rows: list[dict] = data["parallel"][0]["rows"]
    return rows


def test_every_scenario_has_its_rows(report: tuple[dict, str]) -> None:
    data, table = report
    assert [o["target"] for o in data["uncontended"]] == ["memory/django-simba", "memory/django-simba SPI"]
    for scenario in ("contended", "keepalive", "takeover", "memory"):
        assert [o["target"] for o in data[scenario]] == ["memory/django-simba"], scenario
        assert "error" not in data[scenario][0], data[scenario][0].get("error")
    rows = data["async"][0]["rows"]
    assert [(r["mode"], r["n"]) for r in rows] == [(m, n) for n in (1, 20) for m in ("async", "threads")]
    assert [(r["subject"], r["n"]) for r in parallel_rows(data)] == [("django-simba", 1), ("django-simba", 4)]
    assert [o["target"] for o in data["cpu"]] == ["memory/django-simba"]
    titles = (
        "Uncontended",
        "contending one name",
        "Keep-alive",
        "Take-over",
        "Memory",
        "on alock",
        "each cycling a name of its own",
        "Client CPU per uncontended",
    )
    for title in titles:
        assert title in table
    assert "| memory  | django-simba SPI |" in table


def test_measurements_are_plausible(report: tuple[dict, str]) -> None:
    data, _ = report
    cycle = data["uncontended"][0]
    assert 0 < cycle["p50_us"] <= cycle["p99_us"]
    assert len(cycle["rounds"]) == data["meta"]["settings"]["rounds"]
    contention = data["contended"][0]
    assert contention["overlaps"] == 0
    assert sum(contention["rounds"][0]["per_process"]) > 0
    steps = data["keepalive"][0]["steps"]
    assert [s["leases"] for s in steps] == data["meta"]["keepalive_counts"]
    assert data["takeover"][0]["clean_ms"], "no clean take-over was timed"
    assert data["memory"][0]["held"] == data["meta"]["settings"]["memory_leases"]
    rows = data["async"][0]["rows"]
    assert all(r["overlaps"] == 0 and r["acquisitions"] >= r["quota"] for r in rows)
    assert data["checks"]["async"]["memory/django-simba"]["threads"]["ok"] is True
    assert all(r["errors"] == 0 and r["ops"] > 0 and r["cpu_us"] > 0 for r in parallel_rows(data))
    cpu = data["cpu"][0]["subjects"]
    assert set(cpu) == {"memory/django-simba", "memory/django-simba SPI"}
    assert all(value["cpu_us"] > 0 for value in cpu.values())


def test_checks_are_reported(report: tuple[dict, str]) -> None:
    data, table = report
    assert data["checks"]["keepalive"]["memory/django-simba"]["ok"] is True
    assert data["checks"]["contended"]["memory/django-simba"]["exclusive"]["ok"] is True
    assert "clean" in data["checks"]["takeover"]["memory/django-simba"]
    assert data["checks"]["parallel"]["memory/django-simba"]["n=4"]["no_error"]["ok"] is True
    assert "PASS" in table
