"""The fenced register: a PostgreSQL row that refuses a token lower than the one it holds.

The register is the resource the workers protect with their lock. It is written
only by :data:`WRITE`, one conditional ``UPDATE ... WHERE token <= %s``, so a
holder whose term was superseded (and whose successor already wrote) is
refused. Every attempt, accepted or refused, is recorded in a history table in
the same statement; accepted ones carry the register's write count, which is
their exact order (the row lock serializes them).

Used by the test process (schema, reading back) and by the workers (writes),
through psycopg 3 in autocommit, on a connection of its own so the backend
under test never shares it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

SCHEMA_PREFIX = "simba_faults_"

CREATE = """
CREATE TABLE simba_fault_register (
    name text PRIMARY KEY,
    token bigint NOT NULL,
    value text NOT NULL,
    writes bigint NOT NULL DEFAULT 0
);
CREATE TABLE simba_fault_history (
    id bigserial PRIMARY KEY,
    name text NOT NULL,
    token bigint NOT NULL,
    writer text NOT NULL,
    late boolean NOT NULL,
    accepted boolean NOT NULL,
    seq bigint,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""

# The only statement that changes the register: refused unless the token is not lower.
WRITE = """
WITH applied AS (
    UPDATE simba_fault_register
    SET token = %(token)s, value = %(value)s, writes = writes + 1
    WHERE name = %(name)s AND token <= %(token)s
    RETURNING writes
)
INSERT INTO simba_fault_history (name, token, writer, late, accepted, seq)
SELECT %(name)s, %(token)s, %(writer)s, %(late)s, EXISTS (SELECT 1 FROM applied), (SELECT writes FROM applied)
RETURNING accepted
"""


def connect(
    dsn: str, schema: str, *, application_name: str = "simba-fault-register"
) -> psycopg.Connection[Any]:
    """An autocommit connection whose tables are the run's schema; a statement may take 5 s at most."""
    return psycopg.connect(
        dsn,
        autocommit=True,
        connect_timeout=5,
        application_name=application_name,
        options=f"-c search_path={schema} -c statement_timeout=5000",
    )


def create_name(conn: psycopg.Connection[Any], name: str) -> None:
    """A new register cell at token 0, so the first holder's write is accepted."""
    conn.execute("INSERT INTO simba_fault_register (name, token, value) VALUES (%s, 0, '')", (name,))


def write(
    conn: psycopg.Connection[Any], name: str, token: int, value: str, writer: str, *, late: bool
) -> bool:
    """One fenced write; True when the register accepted it."""
    row = conn.execute(
        WRITE, {"name": name, "token": token, "value": value, "writer": writer, "late": late}
    ).fetchone()
    assert row is not None
    return bool(row[0])


def highest_token(conn: psycopg.Connection[Any], name: str) -> int:
    row = conn.execute("SELECT token FROM simba_fault_register WHERE name = %s", (name,)).fetchone()
    return int(row[0]) if row else 0


@dataclass(frozen=True, slots=True)
class Attempt:
    """One row of the history: a write as the register saw it."""

    id: int
    token: int
    writer: str
    late: bool
    accepted: bool
    seq: int | None


def history(conn: psycopg.Connection[Any], name: str) -> list[Attempt]:
    rows = conn.execute(
        "SELECT id, token, writer, late, accepted, seq FROM simba_fault_history WHERE name = %s ORDER BY id",
        (name,),
    ).fetchall()
    return [
        Attempt(
            int(row_id),
            int(token),
            str(writer),
            bool(late),
            bool(accepted),
            None if seq is None else int(seq),
        )
        for row_id, token, writer, late, accepted, seq in rows
    ]


def write_count(conn: psycopg.Connection[Any], name: str) -> int:
    row = conn.execute("SELECT writes FROM simba_fault_register WHERE name = %s", (name,)).fetchone()
    return int(row[0]) if row else 0
