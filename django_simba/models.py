"""Tables of the database backend: sessions, leases, group memberships and the reclaim floor.

The backend reads and writes them with raw SQL (each vendor's module in ``backends/database``);
the models exist for migrations, the admin and ad-hoc queries. Times are
epoch milliseconds on the database's clock, never the application host's.
A lease row keeps its name's token while the name is in use; the purge deletes the rows of
names idle for a while, and a row made again starts above the reclaim floor, so a name's
tokens never go back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

from .spi.names import MAX_METADATA_LENGTH, MAX_NAME_LENGTH

SESSION_ID_LENGTH = 32

if TYPE_CHECKING:  # the stubs make fields generic; at run time they are not subscriptable
    _CharField = models.CharField[str, str]
else:
    _CharField = models.CharField

# Binary collations make names case-sensitive and compare them byte by byte.
_BINARY_COLLATIONS = {
    "postgresql": {"ascii": "C", "unicode": "C"},
    "mysql": {"ascii": "ascii_bin", "unicode": "utf8mb4_bin"},
}


class CaseSensitiveCharField(_CharField):
    """A ``varchar`` compared byte by byte on every database.

    The collation is chosen per vendor when the column is created: "C" on
    PostgreSQL, ``ascii_bin`` / ``utf8mb4_bin`` on MySQL and MariaDB. SQLite
    compares with ``BINARY`` already (its ``LIKE`` is case-insensitive, so the
    backend never uses ``LIKE`` on names).
    """

    description = "Case-sensitive string (binary collation)"

    def __init__(self, *args: Any, charset: str = "unicode", **kwargs: Any) -> None:
        if charset not in ("ascii", "unicode"):
            raise ValueError(f"charset must be 'ascii' or 'unicode', not {charset!r}")
        self.charset = charset
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        if self.charset != "unicode":
            kwargs["charset"] = self.charset
        return name, path, args, kwargs

    def db_type(self, connection: BaseDatabaseWrapper) -> str | None:
        if connection.vendor == "postgresql":
            # Spelled out so Django skips its extra varchar_pattern_ops index: under
            # the "C" collation the primary index already serves prefix scans.
            return f"character varying({self.max_length})"
        return super().db_type(connection)

    def db_parameters(self, connection: BaseDatabaseWrapper) -> dict[str, Any]:
        parameters = super().db_parameters(connection)
        collation = _BINARY_COLLATIONS.get(connection.vendor, {}).get(self.charset)
        if collation and not self.db_collation:
            parameters["collation"] = collation
        return parameters


class Session(models.Model):
    """One per process: live while ``expires_at`` is in the future (database time)."""

    session_id = CaseSensitiveCharField(max_length=SESSION_ID_LENGTH, primary_key=True, charset="ascii")
    expires_at: models.BigIntegerField[int, int] = models.BigIntegerField(
        help_text="Database time, epoch milliseconds."
    )
    # utf8mb4 on MySQL whatever the table's default character set: metadata is free text
    metadata = CaseSensitiveCharField(max_length=MAX_METADATA_LENGTH, default="", blank=True)

    class Meta:
        db_table = "simba_session"
        indexes = [models.Index(fields=["expires_at"], name="simba_session_expires")]
        verbose_name = "session"

    def __str__(self) -> str:
        return self.session_id


class Lease(models.Model):
    """One per lease name ever acquired; ``session_id`` is empty while free."""

    name = CaseSensitiveCharField(max_length=MAX_NAME_LENGTH, primary_key=True, charset="ascii")
    session_id = CaseSensitiveCharField(
        max_length=SESSION_ID_LENGTH, default="", blank=True, charset="ascii", help_text="Empty when free."
    )
    token: models.BigIntegerField[int, int] = models.BigIntegerField(help_text="Term number; never reset.")
    # A database default, as the backend's own SQL inserts rows without naming this column.
    wanted: models.BooleanField[bool, bool] = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Another session was refused this name during the current term (polled databases).",
    )
    freed_at: models.BigIntegerField[int, int] = models.BigIntegerField(
        default=0,
        db_default=0,
        help_text="Database time, epoch milliseconds, when its last term ended (while free).",
    )

    class Meta:
        db_table = "simba_lease"
        # The holder's rows, and the free rows longest idle (what the purge reclaims first).
        indexes = [models.Index(fields=["session_id", "freed_at"], name="simba_lease_session")]
        verbose_name = "lease"
        permissions = [("force_release_lease", "Can force-release a lease")]

    def __str__(self) -> str:
        return self.name


class ReclaimFloor(models.Model):
    """One row: every lease row made from now on starts above ``floor``, a token at least as high
    as any of a row the purge deleted. Only the purge writes it (``backends/database``)."""

    id: models.PositiveSmallIntegerField[int, int] = models.PositiveSmallIntegerField(
        primary_key=True, default=1
    )
    floor: models.BigIntegerField[int, int] = models.BigIntegerField(
        default=0, help_text="Lease rows made from now on start above this token."
    )
    settled: models.BigIntegerField[int, int] = models.BigIntegerField(
        default=0, help_text="A floor older than any call: free rows with tokens up to it may go."
    )
    raised_at: models.BigIntegerField[int, int] = models.BigIntegerField(
        default=0, help_text="Database time, epoch milliseconds, when the floor was last raised."
    )

    class Meta:
        db_table = "simba_reclaim"
        verbose_name = "reclaim floor"

    def __str__(self) -> str:
        return f"above {self.floor}"


class Member(models.Model):
    """A session's membership of a group; live only while the session is."""

    pk = models.CompositePrimaryKey("group_name", "session_id")
    group_name = CaseSensitiveCharField(max_length=MAX_NAME_LENGTH)
    session_id = CaseSensitiveCharField(max_length=SESSION_ID_LENGTH, charset="ascii")

    class Meta:
        db_table = "simba_member"
        indexes = [models.Index(fields=["session_id"], name="simba_member_session")]
        verbose_name = "group member"

    def __str__(self) -> str:
        return f"{self.group_name}/{self.session_id}"
