"""The database's clock as a Django expression, for reading the database backend's tables.

The tables hold expiry times in UTC epoch milliseconds on the database's clock,
and no application host's clock may decide what is left, so "how long is left"
is computed by the database too: the admin annotates ``expires_at -
DatabaseNow()``, never compares with the web server's clock.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BigIntegerField, Expression, F, Subquery
from django.db.models.sql.compiler import SQLCompiler

from ..spi import NotSupported


class DatabaseNow(Expression):
    """The database's current time in UTC epoch milliseconds (fixed for the statement where it can be)."""

    output_field = BigIntegerField()

    def as_sql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> Any:
        raise NotSupported(f"no database clock expression for {connection.vendor}")

    def as_postgresql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> Any:
        return "(extract(epoch FROM statement_timestamp()) * 1000)::bigint", []

    def as_mysql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> Any:
        # UTC_TIMESTAMP: no conversion through the session's time zone.
        return "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)", []

    def as_sqlite(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> Any:
        return "CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)", []


def remaining_ms(expires_at: str = "expires_at") -> Any:
    """``expires_at - now`` on the database: > 0 while live."""
    return F(expires_at) - DatabaseNow()


def session_remaining_ms(session_id: Any, using: str) -> Subquery:
    """Milliseconds left to the session ``session_id`` (an ``OuterRef``), NULL when it is gone."""
    from ..models import Session

    rows = Session.objects.using(using).filter(session_id=session_id)
    return Subquery(rows.annotate(left=remaining_ms()).values("left")[:1], output_field=BigIntegerField())
