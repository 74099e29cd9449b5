"""The public functions, on the process's engine (see ``django_simba.__init__``).

Making a handle reads no settings and starts nothing: a lock or a semaphore finds
the process's engine at each acquisition (so one made at import time follows a
changed ``SIMBA``), and an election made while ``SIMBA`` is invalid waits, never
leading, instead of raising where the application loads (:mod:`.unconfigured`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .engine import Election, EndReason, Group, Lock, Semaphore, Term
from .engine.callbacks import check_callback
from .registry import get_engine
from .spi import ConfigurationError, LeaseInfo, Member, redact, validate_name

logger = logging.getLogger("django_simba")


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
    return Lock(get_engine, name, timeout=timeout, max_hold=max_hold, on_lost=on_lost)


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
    return Semaphore(get_engine, name, permits, timeout=timeout, max_hold=max_hold, on_lost=on_lost)


def election(
    name: str,
    on_elected: Callable[[Term], Any] | None = None,
    on_revoked: Callable[[Term], Any] | None = None,
    *,
    serving_only: bool = True,
) -> Election:
    """Start contending for leadership of ``name``; ``close()`` the result to stop.

    A candidacy started in a process that does not serve (``manage.py shell``, ``migrate``, a
    script: see ``django_simba.servers.serving``) never leads there; ``serving_only=False``
    makes it contend in any process.
    """
    validate_name(name)
    check_callback("on_elected", on_elected)
    check_callback("on_revoked", on_revoked)
    try:
        engine = get_engine()
    except ConfigurationError as error:
        from .unconfigured import Unconfigured

        logger.error("django-simba: the election %r waits, never leading here: %s", name, redact(error))
        candidacy = Election(
            Unconfigured(error), name, on_elected=on_elected, on_revoked=on_revoked, serving_only=serving_only
        )
        return candidacy.start()
    candidacy = engine.election(name, on_elected=on_elected, on_revoked=on_revoked, serving_only=serving_only)
    if candidacy.held:
        from .servers.serving import decision

        logger.info(
            "django-simba: the election %r does not contend here: %s. It contends in the processes "
            "that serve (or pass serving_only=False)",
            name,
            decision(),
        )
    return candidacy


def group(name: str, on_change: Callable[[list[Member]], Any] | None = None) -> Group:
    """A handle on group ``name``: ``join()``, ``leave()``, ``members()``.

    Without ``on_change`` it reads no settings until it is used. With ``on_change`` its members
    are watched at once; with invalid settings that waits (logged) until the handle is used.
    """
    if on_change is None:
        return Group(get_engine, name)
    try:
        engine = get_engine()
    except ConfigurationError as error:
        logger.error("django-simba: the group %r is not watched: %s", name, redact(error))
        return Group(get_engine, name, on_change=on_change)
    return engine.group(name, on_change=on_change)


def owner(name: str) -> LeaseInfo | None:
    """Who holds ``name`` now (``.session_id``, ``.token``, ``.remaining``, ``.metadata``), or None."""
    return get_engine().owner(name)


def leases(prefix: str = "") -> list[LeaseInfo]:
    """Every live lease whose name starts with ``prefix``."""
    return get_engine().leases(prefix)
