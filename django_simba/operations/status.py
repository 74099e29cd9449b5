"""What the operator tools show: sessions, leases and groups of a backend, at one moment.

The management commands and the admin are thin layers over these functions.
Every remaining time comes from the backend, measured on its clock; the time
of the snapshot is the host's, shown for orientation only.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..spi import LeaseBackend, LeaseInfo, Member, SessionInfo, format_duration, validate_prefix


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A session with what it holds (from the same snapshot)."""

    session: SessionInfo
    leases: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()

    @property
    def expired(self) -> bool:
        return self.session.remaining <= 0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Sessions, live leases and groups of one backend.

    ``backend`` is the settings' name for it (``"database"``, ``"redis"``, a dotted path), ``vendor``
    what it runs on (``"postgresql"``, ``"redis"``...).
    """

    backend: str
    vendor: str
    prefix: str
    sessions: list[SessionRow]
    leases: list[LeaseInfo]
    groups: dict[str, list[Member]]
    taken_at: datetime.datetime = field(default_factory=lambda: datetime.datetime.now(datetime.UTC))

    @property
    def label(self) -> str:
        """``"database (sqlite)"``, ``"redis"``...: the backend and, if different, its vendor."""
        same = self.vendor in (self.backend, "custom")
        return self.backend if same else f"{self.backend} ({self.vendor})"

    @property
    def live_sessions(self) -> int:
        return sum(1 for row in self.sessions if not row.expired)


@contextmanager
def tool_backend() -> Iterator[LeaseBackend]:
    """The backend the tools should read: the process's engine's if it has one, else a fresh one.

    A fresh backend is closed afterwards; the engine's is shared and left open.
    """
    from .. import registry
    from ..conf import get_settings

    engine = registry.peek_engine()
    if engine is not None and not engine.closed:
        yield engine.backend
        return
    backend = registry.build_backend(get_settings())
    try:
        yield backend
    finally:
        backend.close()


def collect(backend: LeaseBackend, prefix: str = "") -> Snapshot:
    """Read everything the tools show; raises the backend's errors (BackendUnavailable...)."""
    validate_prefix(prefix)
    sessions = backend.sessions()
    leases = backend.leases(prefix)
    groups = backend.groups(prefix)
    held: dict[str, list[str]] = {}
    for lease in leases:
        held.setdefault(lease.session_id, []).append(lease.name)
    joined: dict[str, list[str]] = {}
    for group, members in groups.items():
        for member in members:
            joined.setdefault(member.session_id, []).append(group)
    rows = [
        SessionRow(info, tuple(held.get(info.session_id, ())), tuple(joined.get(info.session_id, ())))
        for info in sessions
    ]
    from ..conf import get_settings

    return Snapshot(get_settings().backend_alias, backend.vendor, prefix, rows, leases, groups)


def format_seconds(remaining: float) -> str:
    """``"12 s"``, ``"850 ms"``..., or ``"expired"`` once nothing remains."""
    return "expired" if remaining <= 0 else format_duration(remaining)


def as_json(snapshot: Snapshot) -> dict[str, Any]:
    """A JSON-ready dict of fields (never display strings); durations in seconds (float)."""
    return {
        "backend": {"name": snapshot.backend, "vendor": snapshot.vendor},
        "prefix": snapshot.prefix,
        "taken_at": snapshot.taken_at.isoformat(),
        "sessions": [
            {
                "session_id": row.session.session_id,
                "remaining": round(row.session.remaining, 3),
                "expired": row.expired,
                "metadata": row.session.metadata,
                "leases": list(row.leases),
                "groups": list(row.groups),
            }
            for row in snapshot.sessions
        ],
        "leases": [
            {
                "name": lease.name,
                "token": lease.token,
                "session_id": lease.session_id,
                "remaining": round(lease.remaining, 3),
                "metadata": lease.metadata,
            }
            for lease in snapshot.leases
        ],
        "groups": {
            name: [{"session_id": m.session_id, "metadata": m.metadata} for m in members]
            for name, members in snapshot.groups.items()
        },
    }


Styler = Callable[[str], str]


def _plain(text: str) -> str:
    return text


def render_table(
    snapshot: Snapshot,
    *,
    heading: Styler = _plain,
    warning: Styler = _plain,
    success: Styler = _plain,
) -> str:
    """A human-readable report: one table each for sessions, leases and groups."""
    prefix = f", names starting with {snapshot.prefix!r}" if snapshot.prefix else ""
    lines = [
        f"Simba status: {snapshot.label} backend{prefix}, {snapshot.taken_at:%Y-%m-%d %H:%M:%S} UTC",
        f"{_count(snapshot.live_sessions, 'live session')}, {_count(len(snapshot.leases), 'lease')} held, "
        f"{_count(len(snapshot.groups), 'group')}",
        "",
        heading("Sessions"),
    ]
    if snapshot.sessions:
        session_rows = [
            [
                row.session.session_id,
                format_seconds(row.session.remaining),
                str(len(row.leases)),
                ", ".join(row.groups) or "-",
                row.session.metadata,
            ]
            for row in snapshot.sessions
        ]
        styles = [warning if row.expired else success for row in snapshot.sessions]
        lines += _table(["SESSION", "REMAINING", "LEASES", "GROUPS", "METADATA"], session_rows, styles, col=1)
    else:
        lines.append("  (none)")
    lines += ["", heading("Leases")]
    if snapshot.leases:
        lease_rows = [
            [lease.name, str(lease.token), format_seconds(lease.remaining), lease.session_id, lease.metadata]
            for lease in snapshot.leases
        ]
        lines += _table(["NAME", "TOKEN", "REMAINING", "HOLDER", "METADATA"], lease_rows, None, col=1)
    else:
        lines.append("  (none held)")
    lines += ["", heading("Groups")]
    if snapshot.groups:
        group_rows = [
            [name if i == 0 else "", member.session_id, member.metadata]
            for name, members in snapshot.groups.items()
            for i, member in enumerate(members)
        ]
        lines += _table(["GROUP", "MEMBER", "METADATA"], group_rows, None, col=-1)
    else:
        lines.append("  (none)")
    return "\n".join(lines) + "\n"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _table(header: list[str], rows: list[list[str]], styles: list[Styler] | None, *, col: int) -> list[str]:
    """Left-aligned columns; ``col``: the column to style per row (-1: none). The last column is free."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]

    def line(cells: list[str], style: Styler | None) -> str:
        parts = []
        for i, cell in enumerate(cells):
            text = cell.ljust(widths[i]) if i < len(widths) else cell
            parts.append(style(text) if style is not None and i == col else text)
        return ("  " + "  ".join(parts)).rstrip()

    out = [line(header, None)]
    for i, row in enumerate(rows):
        out.append(line(row, styles[i] if styles is not None else None))
    return out


def purge(backend: LeaseBackend, *, limit: int = 1000, batches: int | None = None) -> int:
    """Remove expired sessions in batches of ``limit`` until none is left (or ``batches`` ran)."""
    total = 0
    done = 0
    while batches is None or done < batches:
        removed = backend.purge_expired(limit)
        total += removed
        done += 1
        if removed < limit:
            break
    return total
