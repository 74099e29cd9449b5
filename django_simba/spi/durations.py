"""Durations as people read them, in every message: ``250 ms``, ``4.2 s``, ``17 s``, ``3 min 05 s``."""

from __future__ import annotations

import math


def format_duration(seconds: float | None) -> str:
    """``seconds`` rounded to what matters at its size (never ``4.99976 s``, never ``0.0 s``)."""
    if seconds is None or math.isinf(seconds):
        return "no limit"
    if math.isnan(seconds):
        return "nan s"
    if seconds < 0.001:
        return "0 ms" if seconds <= 0 else "<1 ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


__all__ = ["format_duration"]
