"""The benchmark's single entry point.

    python -m benchmarks.run [--quick | --smoke] [--only redis,postgresql,...]
                             [--scenarios uncontended,contended,keepalive,takeover,memory,async,
                                          parallel,cpu]
                             [--json out.json]

Prints one table per scenario, with the targets of issue 8 as PASS / FAIL
columns, and writes every measured value (every round) to the JSON file.
``--quick`` shrinks the run to a few minutes; ``--smoke`` (for the test suite)
runs each scenario as briefly as it still means something.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import platform
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

from .scenarios import contended, coroutines, cpu, keepalive, memory, parallel, takeover, uncontended
from .scenarios.common import PROFILES, Outcome
from .targets import FAMILIES, select
from .workers import WorkerPool, setup_django

SCENARIOS: dict[str, Any] = {
    "uncontended": uncontended,
    "contended": contended,
    "keepalive": keepalive,
    "takeover": takeover,
    "memory": memory,
    "async": coroutines,
    "parallel": parallel,
    "cpu": cpu,
}

PACKAGES = (
    "django",
    "redis",
    "psycopg",
    "mysqlclient",
    "kazoo",
    "tooz",
    "python-redis-lock",
    "pottery",
    "psycopg2-binary",
    "pymysql",
)


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    mode = parse.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="a few minutes instead of the full run")
    mode.add_argument("--smoke", action="store_true", help="the shortest run that still measures everything")
    parse.add_argument("--only", help=f"comma-separated backends among {', '.join(FAMILIES)}")
    parse.add_argument("--scenarios", help=f"comma-separated among {', '.join(SCENARIOS)}")
    parse.add_argument("--json", metavar="PATH", help="write every measured value there")
    return parse


def _split(value: str | None, allowed: Sequence[str], what: str) -> list[str]:
    if value is None:
        return list(allowed)
    chosen = [item.strip() for item in value.split(",") if item.strip()]
    unknown = [item for item in chosen if item not in allowed]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (choose among {', '.join(allowed)})")
    return chosen


def _versions(env: dict[str, Any], families: list[str]) -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[package] = metadata.version(package)
    with contextlib.suppress(Exception):
        if "redis" in families:
            import redis

            found["redis-server"] = str(
                redis.Redis.from_url(env["redis_url"]).info("server")["redis_version"]
            )
    with contextlib.suppress(Exception):
        if "postgresql" in families:
            from django.db import connections

            with connections["postgresql"].cursor() as cursor:
                cursor.execute("SHOW server_version")
                found["postgresql"] = cursor.fetchone()[0]
    with contextlib.suppress(Exception):
        if "mysql" in families:
            from django.db import connections

            with connections["mysql"].cursor() as cursor:
                cursor.execute("SELECT VERSION()")
                found["mariadb"] = cursor.fetchone()[0]
    with contextlib.suppress(Exception):
        if env.get("zk_port"):
            from tests.servers.zookeeper import monitor

            found["zookeeper"] = monitor(env["zk_port"])["zk_version"].split(",")[0]
    with contextlib.suppress(Exception):
        import sqlite3

        found["sqlite"] = sqlite3.sqlite_version
    return found


def main(argv: Sequence[str] | None = None, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the benchmark; return the report as a dict (what ``--json`` writes)."""
    args = parser().parse_args(argv)
    profile = PROFILES["smoke" if args.smoke else "quick" if args.quick else "full"]
    families = _split(args.only, FAMILIES, "backends")
    scenarios = _split(args.scenarios, list(SCENARIOS), "scenarios")
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    command = "python -m benchmarks.run " + shlex.join(list(argv if argv is not None else sys.argv[1:]))
    setup_django()
    from .environment import servers
    from .report import all_checks, render

    started = time.time()
    results: dict[str, list[Outcome]] = {}
    with servers(families, say) as (env, unusable):
        usable = [family for family in families if family not in unusable]
        targets = select(usable)
        meta: dict[str, Any] = {
            "profile": profile.name,
            "command": command.strip(),
            "started": datetime.datetime.fromtimestamp(started, datetime.UTC).isoformat(timespec="seconds"),
            "host": {"machine": platform.machine(), "cpus": _cpus(), "kernel": platform.release()},
            "versions": _versions(env, usable),
            "keepalive_counts": list(profile.keepalive_counts),
            "settings": profile.__dict__,
            "unusable": unusable,
        }
        pool = WorkerPool()
        try:
            for name in scenarios:
                say(f"{name}: {len(list(targets))} targets")
                results[name] = SCENARIOS[name].run(targets, env, profile, pool, say)
        finally:
            pool.close()
    meta["seconds"] = round(time.time() - started, 1)
    text = render(results, meta)
    print(text, flush=True)
    report = {
        "meta": meta,
        "table": text,
        "checks": all_checks(results),
        **{name: [o.as_json() for o in outcomes] for name, outcomes in results.items()},
    }
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2, default=str)
    return report


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
