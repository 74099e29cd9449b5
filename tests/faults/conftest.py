"""Fixtures of the real-fault tests: the fenced register, the servers under test, the fleet.

Everything lives apart from the other suites: the register and the PostgreSQL
backend's tables in a schema of this run (``simba_faults_<pid>`` in the
``test`` database), the MariaDB backend's tables in a database of this run,
SQLite in a file of this run, a Redis server and ZooKeeper servers of our own
(so restarting them disturbs nobody). All of it is dropped or stopped at the
end; schemas and databases left by a run that died are dropped at the next.
A missing server skips locally and fails under ``SIMBA_REQUIRE_SERVERS=1``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import server_missing
from tests.faults import register
from tests.faults.fleet import REPO, WORKER
from tests.faults.scenario import TIMING, FaultRun, RegisterDB, Result
from tests.faults.servers import MYSQL, POSTGRESQL, postgres_dsn

RESULTS: list[Result] = []
RUN_NAME = f"{register.SCHEMA_PREFIX}{os.getpid()}"


def _orphans(names: list[str]) -> list[str]:
    """Names of this kind whose run (the pid in the name) is gone."""
    found = []
    for name in names:
        pid = name.removeprefix(register.SCHEMA_PREFIX)
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            found.append(name)
    return found


@pytest.fixture(scope="session")
def register_db() -> Iterator[RegisterDB]:
    dsn = postgres_dsn()
    try:
        admin = psycopg.connect(dsn, autocommit=True, connect_timeout=3)
    except psycopg.Error as error:
        server_missing(f"PostgreSQL for the fenced register ({error})")
    with admin:
        schemas = [
            row[0]
            for row in admin.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (register.SCHEMA_PREFIX + "%",)
            )
        ]
        for orphan in _orphans(schemas):
            admin.execute(f'DROP SCHEMA IF EXISTS "{orphan}" CASCADE')
        admin.execute(f'CREATE SCHEMA "{RUN_NAME}"')
        try:
            with register.connect(dsn, RUN_NAME) as conn:
                conn.execute(register.CREATE)
            with register.connect(dsn, RUN_NAME) as conn:
                yield RegisterDB(dsn, RUN_NAME, conn)
        finally:
            admin.execute(f'DROP SCHEMA IF EXISTS "{RUN_NAME}" CASCADE')


def _migrate(databases: dict[str, Any], directory: Path) -> None:
    """Create the database backend's tables once, with ``migrate django_simba`` in a worker process."""
    config: dict[str, Any] = {"backend": "database", "options": {}, "databases": databases}
    config.update(lease=TIMING.lease, renew=TIMING.renew)
    path = directory / "migrate.json"
    path.write_text(json.dumps(config))
    done = subprocess.run(
        [sys.executable, str(WORKER), str(path), "migrate"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"migrate django_simba failed: {done.stderr[-3000:]}"


@contextlib.contextmanager
def _mysql_database() -> Iterator[dict[str, Any]]:
    import MySQLdb

    try:
        admin = MySQLdb.connect(
            host=MYSQL["HOST"],
            port=int(MYSQL["PORT"]),
            user=MYSQL["USER"],
            passwd=MYSQL["PASSWORD"],
            connect_timeout=3,
        )
    except MySQLdb.Error as error:
        server_missing(f"MariaDB/MySQL ({error})")
    try:
        admin.autocommit(True)
        cursor = admin.cursor()
        cursor.execute("SHOW DATABASES LIKE %s", (register.SCHEMA_PREFIX.replace("_", "\\_") + "%",))
        for orphan in _orphans([row[0] for row in cursor.fetchall()]):
            cursor.execute(f"DROP DATABASE IF EXISTS `{orphan}`")
        cursor.execute(f"CREATE DATABASE `{RUN_NAME}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        try:
            yield {**MYSQL, "NAME": RUN_NAME, "TEST": {}}
        finally:
            cursor.execute(f"DROP DATABASE IF EXISTS `{RUN_NAME}`")
    finally:
        admin.close()


@pytest.fixture(scope="session")
def databases(
    register_db: RegisterDB, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], dict[str, Any]]]:
    """``databases(alias)``: the worker's DATABASES for the alias under test, migrated (once)."""
    prepared: dict[str, dict[str, Any]] = {}
    directory = tmp_path_factory.mktemp("databases")
    with contextlib.ExitStack() as stack:

        def get(alias: str) -> dict[str, Any]:
            if alias not in prepared:
                default: dict[str, Any]
                if alias == "postgresql":
                    default = {**POSTGRESQL, "OPTIONS": {"options": f"-c search_path={register_db.schema}"}}
                elif alias == "mysql":
                    default = stack.enter_context(_mysql_database())
                else:
                    default = {
                        "ENGINE": "django.db.backends.sqlite3",
                        "NAME": str(directory / "faults.sqlite3"),
                    }
                found = {"default": default}
                _migrate(found, directory)
                prepared[alias] = found
            return copy.deepcopy(prepared[alias])  # the caller may change its copy

        yield get


@pytest.fixture(scope="session")
def through_pgbouncer(
    databases: Callable[[str], dict[str, Any]], register_db: RegisterDB
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """``(options, databases)`` of workers on PostgreSQL through a PgBouncer of this run.

    Transaction pooling: the run's schema is set on each server connection PgBouncer opens
    (its ``connect_query``), and LISTEN goes over a direct connection.
    """
    from tests.servers.pgbouncer import ensure_installed, pgbouncer

    reason = ensure_installed()
    if reason:
        server_missing(reason)
    direct = databases("postgresql")["default"]  # migrated in the run's schema
    search_path = f"SET search_path TO {register_db.schema}"
    entry = (
        f"host={direct['HOST']} port={direct['PORT']} dbname={direct['NAME']} connect_query='{search_path}'"
    )
    with pgbouncer(
        direct["HOST"], int(direct["PORT"]), [direct["USER"]], databases={RUN_NAME: entry}
    ) as bouncer:
        bounced = {**direct, "HOST": bouncer.host, "PORT": str(bouncer.port), "NAME": RUN_NAME, "OPTIONS": {}}
        listen = {key: direct[key] for key in ("HOST", "PORT", "NAME", "OPTIONS")}
        yield {"transaction_pooling": True, "listen": listen}, {"default": bounced}


@pytest.fixture(scope="module")
def own_redis() -> Iterator[Any]:
    """A redis-server of this run with AOF fsynced at every write, so a restart keeps every token."""
    from tests.servers.redis_cluster import REDIS_SERVER, redis_server

    if not shutil.which(REDIS_SERVER):
        server_missing(f"{REDIS_SERVER} (to start a Redis server of the tests' own)")
    with redis_server("--appendonly", "yes", "--appendfsync", "always") as server:
        yield server


@pytest.fixture
def forgetful_redis() -> Iterator[Any]:
    """A redis-server of this test without persistence: a restart loses every key, as a cache's would."""
    from tests.servers.redis_cluster import REDIS_SERVER, redis_server

    if not shutil.which(REDIS_SERVER):
        server_missing(f"{REDIS_SERVER} (to start a Redis server of the tests' own)")
    with redis_server() as server:
        yield server


@pytest.fixture
def own_postgresql(tmp_path: Path) -> Iterator[tuple[Any, dict[str, Any]]]:
    """A PostgreSQL server of this test (never the shared one), migrated: ``(server, DATABASES)``."""
    from tests.servers.postgres import postgres_server

    try:
        started = postgres_server()
        server = started.__enter__()
    except RuntimeError as error:
        server_missing(f"a PostgreSQL server of the test's own ({error})")
    try:
        with psycopg.connect(server.dsn("postgres"), autocommit=True) as admin:
            admin.execute("CREATE DATABASE simba_faults")
        databases = {
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": "simba_faults",
                "USER": server.user,
                "HOST": server.host,
                "PORT": str(server.port),
            }
        }
        _migrate(databases, tmp_path)
        yield server, databases
    finally:
        started.__exit__(None, None, None)


@pytest.fixture(scope="module")
def zookeeper_server() -> Iterator[Any]:
    from tests.servers.zookeeper import serving, zookeeper_standalone

    with serving(zookeeper_standalone, "a standalone ZooKeeper") as server:
        yield server


@pytest.fixture(scope="module")
def zookeeper_ensemble() -> Iterator[Any]:
    from tests.servers.zookeeper import serving
    from tests.servers.zookeeper import zookeeper_ensemble as start

    with serving(start, "a 3-node ZooKeeper ensemble") as ensemble:
        yield ensemble


@pytest.fixture
def fault_run(register_db: RegisterDB, tmp_path: Path) -> Iterator[FaultRun]:
    """The test's fleet and register cell; the workers are stopped by PID whatever happens."""
    run = FaultRun(register_db, tmp_path, RESULTS)
    try:
        yield run
    finally:
        run.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not RESULTS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("real faults: take-over and fencing")
    write(
        f"{'backend':<22} {'fault':<22} {'take-over':>9} {'bound':>6} {'detect':>6} "
        f"{'terms':>5} {'acc':>5} {'refused':>7} {'late':>4}  notes"
    )
    for result in RESULTS:
        verdict = result.verdict
        takeover = f"{result.takeover:.3f}" if result.takeover is not None else "-"
        detection = f"{result.detection:.3f}" if result.detection is not None else "-"
        counts = (
            (verdict.terms, verdict.accepted, verdict.refused, verdict.late_writes) if verdict else (0,) * 4
        )
        bad = len(verdict.violations) if verdict else 0
        note = (
            result.note
            + (f"; {bad} VIOLATION(S)" if bad else "")
            + (f"; {len(result.problems)} crash/hang" if result.problems else "")
        )
        write(
            f"{result.backend:<22} {result.fault:<22} {takeover:>9} {result.bound:>6.2f} {detection:>6} "
            f"{counts[0]:>5} {counts[1]:>5} {counts[2]:>7} {counts[3]:>4}  {note}"
        )
    path = os.environ.get("SIMBA_FAULTS_REPORT")
    if path:
        Path(path).write_text(
            json.dumps(
                [
                    {
                        **{k: v for k, v in vars(r).items() if k != "verdict"},
                        **(vars(r.verdict) if r.verdict else {}),
                    }
                    for r in RESULTS
                ],
                indent=2,
            )
        )
