"""Raw floors: the fewest commands or statements each server needs for a fenced lock.

* Redis: ``SET name token NX PX ttl`` + ``DEL name``.
* PostgreSQL, MariaDB, SQLite: one upsert that takes a free row and adds one to its
  token (``RETURNING`` it), and one ``UPDATE`` that frees the row; autocommit.
* ZooKeeper: create an ephemeral node + delete it.

Also the session-bound locks each SQL server offers for free (no fencing, lost
with the connection): PostgreSQL advisory locks and MariaDB's ``GET_LOCK``.
"""

from __future__ import annotations

import uuid
from typing import Any

from .base import Env, LockCandidate, int64_key, poll_until

FLOOR_TABLE = "bench_floor"

PG_TAKE = f"""
INSERT INTO {FLOOR_TABLE} (name, holder, token) VALUES (%s, %s, 1)
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, token = {FLOOR_TABLE}.token + 1
WHERE {FLOOR_TABLE}.holder = '' RETURNING token
"""
MYSQL_TAKE = f"""
INSERT INTO {FLOOR_TABLE} (name, holder, token) VALUES (%s, %s, 1)
ON DUPLICATE KEY UPDATE token = IF(holder = '', token + 1, token),
                        holder = IF(holder = '', VALUES(holder), holder)
RETURNING token, holder
"""
SQLITE_TAKE = f"""
INSERT INTO {FLOOR_TABLE} (name, holder, token) VALUES (?, ?, 1)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = token + 1
WHERE {FLOOR_TABLE}.holder = '' RETURNING token
"""
FREE = f"UPDATE {FLOOR_TABLE} SET holder = '' WHERE name = %s AND holder = %s"


class RawRedisLock:
    def __init__(self, env: Env, name: str, ttl: float) -> None:
        import redis

        self.client = redis.Redis.from_url(env["redis_url"])
        self.name = f"bench:raw:{name}"
        self.token = uuid.uuid4().hex
        self.ttl_ms = int(ttl * 1000)

    def acquire(self, timeout: float | None) -> bool:
        return poll_until(
            lambda: bool(self.client.set(self.name, self.token, nx=True, px=self.ttl_ms)), timeout
        )

    def release(self) -> None:
        self.client.delete(self.name)

    def close(self) -> None:
        self.client.close()


class RawPostgresqlLock:
    """psycopg 3 in autocommit, as the database backend's driver."""

    def __init__(self, env: Env, name: str, ttl: float) -> None:
        import psycopg

        self.conn = psycopg.connect(env["pg_dsn"], autocommit=True)
        self.name, self.me = name, uuid.uuid4().hex

    def _take(self) -> bool:
        return self.conn.execute(PG_TAKE, (self.name, self.me)).fetchone() is not None

    def acquire(self, timeout: float | None) -> bool:
        return poll_until(self._take, timeout)

    def release(self) -> None:
        self.conn.execute(FREE, (self.name, self.me))

    def close(self) -> None:
        self.conn.close()


class RawMysqlLock:
    """mysqlclient in autocommit, as the database backend's driver."""

    def __init__(self, env: Env, name: str, ttl: float) -> None:
        self.conn = mysql_connect(env)
        self.name, self.me = name, uuid.uuid4().hex

    def _take(self) -> bool:
        cursor = self.conn.cursor()
        cursor.execute(MYSQL_TAKE, (self.name, self.me))
        row = cursor.fetchone()
        cursor.close()
        return bool(row and row[1] == self.me)

    def acquire(self, timeout: float | None) -> bool:
        return poll_until(self._take, timeout)

    def release(self) -> None:
        cursor = self.conn.cursor()
        cursor.execute(FREE, (self.name, self.me))
        cursor.close()

    def close(self) -> None:
        self.conn.close()


class RawSqliteLock:
    """The sqlite3 module in autocommit, on the file the database backend's alias uses."""

    def __init__(self, env: Env, name: str, ttl: float) -> None:
        import sqlite3

        self.conn = sqlite3.connect(env["sqlite_path"], isolation_level=None, timeout=5)
        self.name, self.me = name, uuid.uuid4().hex

    def _take(self) -> bool:
        # fetchall: a RETURNING statement keeps its write transaction open until its rows are read
        return bool(self.conn.execute(SQLITE_TAKE, (self.name, self.me)).fetchall())

    def acquire(self, timeout: float | None) -> bool:
        return poll_until(self._take, timeout)

    def release(self) -> None:
        self.conn.execute(FREE.replace("%s", "?"), (self.name, self.me))

    def close(self) -> None:
        self.conn.close()


class RawZookeeperLock:
    """kazoo: create an ephemeral node, delete it."""

    def __init__(self, env: Env, name: str, ttl: float) -> None:
        from kazoo.client import KazooClient

        self.client = KazooClient(hosts=env["zk_hosts"], timeout=ttl)
        self.client.start(timeout=10)
        self.path = f"/bench-raw/{name}"
        self.client.ensure_path("/bench-raw")

    def _create(self) -> bool:
        from kazoo.exceptions import NodeExistsError

        try:
            self.client.create(self.path, ephemeral=True)
            return True
        except NodeExistsError:
            return False

    def acquire(self, timeout: float | None) -> bool:
        return poll_until(self._create, timeout)

    def release(self) -> None:
        self.client.delete(self.path)

    def close(self) -> None:
        self.client.stop()
        self.client.close()


class PostgresqlAdvisoryLock:
    """``pg_try_advisory_lock`` / ``pg_advisory_lock`` + unlock on one persistent connection.

    Blocking waits queue on the server; ``lock_timeout`` bounds a timed wait.
    """

    def __init__(self, env: Env, name: str, ttl: float) -> None:
        import psycopg

        self.conn = psycopg.connect(env["pg_dsn"], autocommit=True)
        self.key = int64_key(name)

    def acquire(self, timeout: float | None) -> bool:
        import psycopg

        if timeout == 0:
            row = self.conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
            return bool(row and row[0])
        if timeout is None:
            self.conn.execute("SELECT pg_advisory_lock(%s)", (self.key,))
            return True
        # One simple query: a lock timeout undoes the SET along with the rest of it.
        limit = max(1, int(timeout * 1000))
        try:
            with psycopg.ClientCursor(self.conn) as cursor:
                cursor.execute(
                    f"SET lock_timeout = {limit}; SELECT pg_advisory_lock(%s); SET lock_timeout = 0",
                    (self.key,),
                )
            return True
        except psycopg.errors.LockNotAvailable:
            return False

    def release(self) -> None:
        self.conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))

    def close(self) -> None:
        self.conn.close()


class MysqlGetLock:
    """``GET_LOCK(name, seconds)`` + ``RELEASE_LOCK`` on one persistent connection (server queue)."""

    def __init__(self, env: Env, name: str, ttl: float) -> None:
        self.conn = mysql_connect(env)
        self.name = name

    def _query(self, sql: str, *args: Any) -> Any:
        cursor = self.conn.cursor()
        cursor.execute(sql, args)
        row = cursor.fetchone()
        cursor.close()
        return row[0]

    def acquire(self, timeout: float | None) -> bool:
        wait = 31536000 if timeout is None else timeout
        return bool(self._query("SELECT GET_LOCK(%s, %s)", self.name, wait) == 1)

    def release(self) -> None:
        self._query("SELECT RELEASE_LOCK(%s)", self.name)

    def close(self) -> None:
        self.conn.close()


def mysql_connect(env: Env) -> Any:
    import MySQLdb

    conn = MySQLdb.connect(**env["mysql"])
    conn.autocommit(True)
    return conn


def make_redis(env: Env, name: str, ttl: float) -> RawRedisLock:
    return RawRedisLock(env, name, ttl)


def make_postgresql(env: Env, name: str, ttl: float) -> RawPostgresqlLock:
    return RawPostgresqlLock(env, name, ttl)


def make_mysql(env: Env, name: str, ttl: float) -> RawMysqlLock:
    return RawMysqlLock(env, name, ttl)


def make_sqlite(env: Env, name: str, ttl: float) -> RawSqliteLock:
    return RawSqliteLock(env, name, ttl)


def make_zookeeper(env: Env, name: str, ttl: float) -> RawZookeeperLock:
    return RawZookeeperLock(env, name, ttl)


def make_pg_advisory(env: Env, name: str, ttl: float) -> PostgresqlAdvisoryLock:
    return PostgresqlAdvisoryLock(env, name, ttl)


def make_mysql_get_lock(env: Env, name: str, ttl: float) -> MysqlGetLock:
    return MysqlGetLock(env, name, ttl)


def make_pg_advisory_candidate(env: Env, name: str, ttl: float) -> LockCandidate:
    return LockCandidate(PostgresqlAdvisoryLock(env, name, ttl))
