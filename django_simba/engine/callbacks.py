"""The one shape of each callback a user hands the engine, checked when it is handed over.

=================  ===========================  ===============================================
callback           called as                    when
=================  ===========================  ===============================================
``on_elected``     ``on_elected(term)``         an election won a term
``on_revoked``     ``on_revoked(term)``         an election's term ended (``term.ended`` says why)
``on_lost``        ``on_lost(term, reason)``    a lock's or a permit's term ended without its
                                                release (``reason.is_loss``)
``on_change``      ``on_change(members)``       a watched group's live members changed
=================  ===========================  ===============================================

Each runs on the engine's callback thread, one at a time (an async election's or group's
coroutine callback on its event loop). A callback that cannot be called with those
arguments is refused at once, with a ``TypeError`` naming the shape, rather than failing on
that thread later, when it is too late to tell its caller.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

#: The arguments each callback is called with.
SHAPES: dict[str, tuple[str, ...]] = {
    "on_elected": ("term",),
    "on_revoked": ("term",),
    "on_lost": ("term", "reason"),
    "on_change": ("members",),
}


def check_callback(role: str, callback: Callable[..., Any] | None) -> None:
    """Refuse ``callback`` unless it can be called as ``SHAPES[role]`` says (``None`` is no callback)."""
    if callback is None:
        return
    shape = f"{role}({', '.join(SHAPES[role])})"
    if not callable(callback):
        raise TypeError(f"{role} must be a callable taking {shape}, not {callback!r}")
    try:
        signature = inspect.signature(callback)
    except (TypeError, ValueError):
        return  # no signature to read (some built-ins): it will tell when called
    try:
        signature.bind(*(object() for _ in SHAPES[role]))
    except TypeError as error:
        raise TypeError(f"{role} is called as {shape}: {callback!r} cannot take that ({error})") from None
