"""Moved to :mod:`django_simba.operations.status`; this path keeps working."""

from .operations.status import (
    SessionRow,
    Snapshot,
    Styler,
    as_json,
    backend_label,
    collect,
    format_seconds,
    purge,
    render_table,
    tool_backend,
)

__all__ = [
    "SessionRow",
    "Snapshot",
    "Styler",
    "as_json",
    "backend_label",
    "collect",
    "format_seconds",
    "purge",
    "render_table",
    "tool_backend",
]
