"""Moved to :mod:`django_simba.operations.runner`; this path keeps working."""

from .operations.runner import (
    EXIT_LOST,
    EXIT_NOT_EXECUTABLE,
    EXIT_NOT_FOUND,
    FORWARDED_SIGNALS,
    KILL_MARGIN,
    STOP_SIGNALS,
    Mode,
    RunOutcome,
    command_line,
    run_exclusively,
)

__all__ = [
    "EXIT_LOST",
    "EXIT_NOT_EXECUTABLE",
    "EXIT_NOT_FOUND",
    "FORWARDED_SIGNALS",
    "KILL_MARGIN",
    "STOP_SIGNALS",
    "Mode",
    "RunOutcome",
    "command_line",
    "run_exclusively",
]
