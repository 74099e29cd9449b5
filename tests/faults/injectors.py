"""Faults injected from outside a worker: its connections killed on the server, its session expired.

Which connections belong to a worker is found the way an operator would: by
the worker's application name on PostgreSQL, and elsewhere by matching the
worker's own TCP sockets (``/proc/<pid>/fd`` and ``/proc/<pid>/net/tcp``) with
the server's client list.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from typing import Any

import psycopg

HOST = "127.0.0.1"


def local_ports(pid: int, server_port: int) -> set[int]:
    """Local ports of ``pid``'s established TCP connections to ``server_port`` on loopback."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    with open(f"/proc/{pid}/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if state == "01" and inode in inodes and int(remote.split(":")[1], 16) == server_port:
                ports.add(int(local.split(":")[1], 16))
    return ports


def terminate_postgres_backends(admin: psycopg.Connection[Any], application_name: str) -> int:
    """``pg_terminate_backend`` on every connection with that application name; how many."""
    rows = admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        (application_name,),
    ).fetchall()
    return sum(1 for (done,) in rows if done)


def kill_mysql_connections(admin: Any, ports: set[int]) -> int:
    """``KILL <id>`` on every MariaDB connection coming from one of ``ports``; how many."""
    cursor = admin.cursor()
    try:
        cursor.execute("SELECT id, host FROM information_schema.processlist")
        ids = [
            row[0] for row in cursor.fetchall() if str(row[1]).rpartition(":")[2] in {str(p) for p in ports}
        ]
        for connection_id in ids:
            with contextlib.suppress(Exception):  # it may have closed meanwhile
                cursor.execute(f"KILL {int(connection_id)}")
    finally:
        cursor.close()
    return len(ids)


def kill_redis_clients(admin: Any, ports: set[int]) -> int:
    """``CLIENT KILL ID`` on every Redis client connected from one of ``ports``; how many."""
    killed = 0
    for client in admin.client_list():
        if int(str(client["addr"]).rpartition(":")[2]) in ports:
            killed += int(admin.execute_command("CLIENT", "KILL", "ID", client["id"], "SKIPME", "yes"))
    return killed


def expire_zookeeper_session(hosts: str, client_id: tuple[int, bytes]) -> None:
    """Close a ZooKeeper session from a second client that attaches to it (kazoo's test trick)."""
    from kazoo.client import KazooClient

    intruder = KazooClient(hosts=hosts, client_id=client_id, timeout=2.0)
    try:
        intruder.start(10)
        intruder.stop()
    finally:
        intruder.close()


@contextlib.contextmanager
def sqlite_exclusive(path: str) -> Iterator[None]:
    """Hold SQLite's exclusive lock on ``path``: every other connection's statement waits, then fails."""
    connection = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
    try:
        connection.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        connection.close()
