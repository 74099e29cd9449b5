"""The public functions, on the process's engine (see ``django_simba.__init__``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .engine import Election, EndReason, Group, Lock, Semaphore, Term
from .registry import get_engine
from .spi import LeaseInfo, Member


def lock(
    name: str,
    timeout: float | None = None,
    *,
    max_hold: float | None = None,
    on_lost: Callable[[Term, EndReason], Any] | None = None,
) -> Lock:
    """A lock on ``name``: ``with lock("invoices:42", timeout=5) as term: ...``.

    ``timeout``: seconds to wait (None: forever; 0: one try), else LockTimeout.
    Not re-entrant. ``term.token`` is the fencing token.
    """
    return get_engine().lock(name, timeout=timeout, max_hold=max_hold, on_lost=on_lost)


def semaphore(
    name: str,
    permits: int,
    timeout: float | None = None,
    *,
    max_hold: float | None = None,
    on_lost: Callable[[Term, EndReason], Any] | None = None,
) -> Semaphore:
    """At most ``permits`` holders of ``name`` at once: ``with semaphore("exports", 3) as term: ...``.

    Each holder holds one permit, a lease named ``name:1`` to ``name:{permits}``, with a term and
    a fencing token of its own (``term.name`` says which permit). Same ``timeout``, ``max_hold``
    and ``on_lost`` as :func:`lock`; not re-entrant.
    """
    return get_engine().semaphore(name, permits, timeout=timeout, max_hold=max_hold, on_lost=on_lost)


def election(
    name: str,
    on_elected: Callable[[Term], Any] | None = None,
    on_revoked: Callable[[Term], Any] | None = None,
) -> Election:
    """Start contending for leadership of ``name``; ``close()`` the result to stop."""
    return get_engine().election(name, on_elected=on_elected, on_revoked=on_revoked)


def group(name: str, on_change: Callable[[list[Member]], Any] | None = None) -> Group:
    """A handle on group ``name``: ``join()``, ``leave()``, ``members()``."""
    return get_engine().group(name, on_change=on_change)


def owner(name: str) -> LeaseInfo | None:
    """Who holds ``name`` now (``.session_id``, ``.token``, ``.remaining``, ``.metadata``), or None."""
    return get_engine().owner(name)


def leases(prefix: str = "") -> list[LeaseInfo]:
    """Every live lease whose name starts with ``prefix``."""
    return get_engine().leases(prefix)
