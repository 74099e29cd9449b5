"""The tables: migrations apply and unapply on every database, binary collations, no pending change."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connections

from django_simba.backends.database import DatabaseBackend
from django_simba.spi import BackendUnavailable

from .conftest import each_alias, on

TABLES = {"simba_session", "simba_lease", "simba_member", "simba_reclaim"}
# Collation of the name and session id columns where the database has them.
COLLATIONS = {
    "postgresql": {
        ("simba_lease", "name"): "C",
        ("simba_lease", "session_id"): "C",
        ("simba_member", "group_name"): "C",
        ("simba_session", "session_id"): "C",
    },
    "mysql": {
        ("simba_lease", "name"): "ascii_bin",
        ("simba_lease", "session_id"): "ascii_bin",
        ("simba_member", "group_name"): "utf8mb4_bin",
        ("simba_member", "session_id"): "ascii_bin",
        ("simba_session", "session_id"): "ascii_bin",
        ("simba_session", "metadata"): "utf8mb4_bin",
    },
}


def tables(alias: str) -> set[str]:
    with connections[alias].cursor() as cursor:
        return TABLES & set(connections[alias].introspection.table_names(cursor))


def collations(alias: str) -> dict[tuple[str, str], str]:
    schema = "current_schema()" if alias == "postgresql" else "DATABASE()"
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, collation_name FROM information_schema.columns"
            f" WHERE table_schema = {schema}"
            " AND table_name IN ('simba_session', 'simba_lease', 'simba_member')"
            " AND collation_name IS NOT NULL"
        )
        return {(table.lower(), column.lower()): collation for table, column, collation in cursor.fetchall()}


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_migrations_apply_and_unapply(alias: str, backend: DatabaseBackend) -> None:
    assert tables(alias) == TABLES
    if alias in COLLATIONS:
        assert collations(alias).items() >= COLLATIONS[alias].items()
    try:
        call_command("migrate", "django_simba", "zero", database=alias, verbosity=0)
        assert tables(alias) == set()
        with pytest.raises(BackendUnavailable, match="migrate django_simba"):
            backend.open_session(30, "no tables")
    finally:
        call_command("migrate", "django_simba", database=alias, verbosity=0)
    assert tables(alias) == TABLES
    backend.close_session(backend.open_session(30, "tables again").session_id)


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_the_initial_migration_is_the_sql_expected(alias: str) -> None:
    out = StringIO()
    call_command("sqlmigrate", "django_simba", "0001", database=alias, stdout=out)
    sql = out.getvalue()
    for index in ("simba_session_expires", "simba_lease_session", "simba_member_session"):
        assert index in sql
    assert 'PRIMARY KEY ("group_name", "session_id")' in sql.replace("`", '"')
    assert "_like" not in sql  # no second index for LIKE: names use a binary collation


@pytest.mark.parametrize("alias", [pytest.param("sqlite", marks=on("sqlite"))], indirect=True)
def test_models_need_no_new_migration(alias: str) -> None:
    out = StringIO()
    call_command("makemigrations", "django_simba", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()
