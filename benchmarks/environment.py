"""The servers of a run: found on loopback, or (ZooKeeper) started for the run and stopped by PID.

* Redis: the server on ``SIMBA_BENCH_REDIS_URL`` (default ``redis://127.0.0.1:6379/14``).
* PostgreSQL and MariaDB: the ``simba_bench`` database is created when missing, the
  django_simba tables migrated into it, and the raw floor's table created.
* SQLite: a file under the benchmark's directory, migrated the same way.
* ZooKeeper: a standalone server of the test suite's helper (``tests/servers/zookeeper.py``).

A family whose server cannot be reached is reported, and its targets are left out.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlparse

from .peers.base import Env
from .peers.raw import FLOOR_TABLE

REDIS_URL = os.environ.get("SIMBA_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")

FLOOR_DDL = {
    "postgresql": f"CREATE TABLE IF NOT EXISTS {FLOOR_TABLE} "
    "(name varchar(128) PRIMARY KEY, holder varchar(64) NOT NULL DEFAULT '', token bigint NOT NULL)",
    "mysql": f"CREATE TABLE IF NOT EXISTS {FLOOR_TABLE} "
    "(name varchar(128) CHARACTER SET ascii COLLATE ascii_bin PRIMARY KEY, "
    "holder varchar(64) NOT NULL DEFAULT '', token bigint NOT NULL) ENGINE=InnoDB",
    "sqlite": f"CREATE TABLE IF NOT EXISTS {FLOOR_TABLE} "
    "(name varchar(128) PRIMARY KEY, holder varchar(64) NOT NULL DEFAULT '', token bigint NOT NULL)",
}


def _database_settings(alias: str) -> dict[str, Any]:
    from django.conf import settings

    return dict(settings.DATABASES[alias])


def _create_database(alias: str) -> None:
    db = _database_settings(alias)
    if alias == "postgresql":
        import psycopg

        with psycopg.connect(
            host=db["HOST"],
            port=db["PORT"],
            user=db["USER"],
            password=db["PASSWORD"],
            dbname="postgres",
            autocommit=True,
            connect_timeout=5,
        ) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db["NAME"],)).fetchone():
                conn.execute(f'CREATE DATABASE "{db["NAME"]}"')
    elif alias == "mysql":
        import MySQLdb

        conn = MySQLdb.connect(
            host=db["HOST"], port=int(db["PORT"]), user=db["USER"], password=db["PASSWORD"], connect_timeout=5
        )
        try:
            cursor = conn.cursor()
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS `{db['NAME']}` CHARACTER SET utf8mb4")
        finally:
            conn.close()
    elif alias == "sqlite":
        from pathlib import Path

        Path(db["NAME"]).parent.mkdir(parents=True, exist_ok=True)


def prepare_database(alias: str) -> None:
    """Create the database if needed, migrate django_simba into it, create the floor's table."""
    from django.core.management import call_command
    from django.db import connections

    _create_database(alias)
    call_command("migrate", "django_simba", database=alias, verbosity=0, interactive=False)
    with connections[alias].cursor() as cursor:
        cursor.execute(FLOOR_DDL[alias])
    connections[alias].close()


def database_env() -> Env:
    from django.conf import settings

    pg, my = settings.DATABASES["postgresql"], settings.DATABASES["mysql"]
    return {
        "pg": {"host": pg["HOST"], "port": int(pg["PORT"]), "user": pg["USER"], "dbname": pg["NAME"]},
        "pg_dsn": f"host={pg['HOST']} port={pg['PORT']} user={pg['USER']} dbname={pg['NAME']}"
        + (f" password={pg['PASSWORD']}" if pg["PASSWORD"] else ""),
        "mysql": {
            "host": my["HOST"],
            "port": int(my["PORT"]),
            "user": my["USER"],
            "password": my["PASSWORD"],
            "database": my["NAME"],
        },
        "sqlite_path": settings.DATABASES["sqlite"]["NAME"],
    }


def redis_env() -> Env:
    parsed = urlparse(REDIS_URL)
    return {
        "redis_url": REDIS_URL,
        "redis": {
            "host": parsed.hostname,
            "port": parsed.port or 6379,
            "db": int(parsed.path.strip("/") or 0),
        },
    }


def check_redis() -> None:
    import redis

    from django_simba.testing.redis_fixtures import assume_nothing_lost

    client = redis.Redis.from_url(REDIS_URL, socket_timeout=3)
    try:
        client.ping()
    finally:
        client.close()
    # a database the backend never used holds its first grant back for a lease: not a cost to time
    assume_nothing_lost(REDIS_URL)


@contextlib.contextmanager
def servers(families: list[str], log: Callable[[str], None]) -> Iterator[tuple[Env, dict[str, str]]]:
    """Yield the environment of the families that are usable, and why the others are not."""
    env: Env = {**redis_env(), **database_env()}
    unusable: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        for family in families:
            try:
                if family == "redis":
                    check_redis()
                elif family in ("postgresql", "mysql", "sqlite"):
                    prepare_database(family)
                elif family == "zookeeper":
                    from tests.servers.zookeeper import ensure_installed, zookeeper_standalone

                    missing = ensure_installed()
                    if missing:
                        raise RuntimeError(missing)
                    # fsync on, as in production (the test suite's servers skip it)
                    server = stack.enter_context(zookeeper_standalone(extra_config={"forceSync": "yes"}))
                    env["zk_hosts"], env["zk_port"] = server.hosts, server.client_port
                    log(f"ZooKeeper started on {server.hosts} (pid {server.pid})")
            except Exception as error:  # a missing server leaves its rows out, it does not stop the run
                unusable[family] = f"{type(error).__name__}: {error}"
                log(f"{family}: not usable ({unusable[family]})")
        yield env, unusable
