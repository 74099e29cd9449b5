"""Small statistics: nearest-rank percentiles and medians."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of ``values`` (``fraction`` in [0, 1])."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def rotated(items: Sequence[object], turn: int) -> list[object]:
    """``items`` starting at ``turn`` (mod len): each round begins with another target."""
    if not items:
        return []
    shift = turn % len(items)
    return [*items[shift:], *items[:shift]]
