"""A server that grants a shorter session than asked, and the invariant that catches what it did.

ZooKeeper clamps the session timeout a client asks for to its ``maxSessionTimeout``; a database
or Redis reply can be shorter than asked too. An engine that went on renewing every
``RENEW_INTERVAL`` lost every session each time the short grant ran out, and every term with
it, in calm as in storms, without a word (issue 22.5).

* :func:`session_cap`: a share of the runs (drawn from the seed alone, so every other draw of a
  run stays as it was) uses a model backend that grants at most a fraction of the lease.
* :func:`session_lost`: the oracle's view of a session loss. A process that loses its session
  (its local deadline passed, or the backend expired it) while nothing went wrong with it or
  the backend for a lease and the settling time before is a violation: a session is lost only
  to a fault (the network of each process is its own, so other processes' faults do not count).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from ...engine import EndReason
from .faults import FaultKind

if TYPE_CHECKING:
    from .config import SimulationConfig
    from .process import SimProcess

#: The share of runs whose backend grants less than the lease asks.
SHORT_GRANT_RUNS = 0.25
#: What such a backend grants, as a fraction of the lease (drawn uniformly): often less than the
#: renew interval (a third of the lease by default), where renewing on that interval loses it.
CAP_RANGE = (0.1, 0.6)

CALM_LOSS = "a session lost while nothing went wrong"
FAULT = "server grants a shorter session"

#: Episodes aimed at whichever process leads when they begin, not at their seat alone.
_ANY_PROCESS = frozenset({FaultKind.SESSION_EVICTED, FaultKind.FORK, FaultKind.CRASH, FaultKind.RESIGN})

#: The ways a session ends that only a fault may bring about (a close is the process's own doing).
_LOSSES = frozenset({EndReason.DEADLINE, EndReason.SESSION_EXPIRED})


def session_cap(config: SimulationConfig) -> float | None:
    """The longest session the run's backend grants, in seconds; None: what is asked."""
    rng = random.Random(f"{config.seed}:short-grants")
    if rng.random() >= SHORT_GRANT_RUNS:
        return None
    return rng.uniform(*CAP_RANGE) * config.lease


def session_lost(process: SimProcess, reason: EndReason) -> None:
    """``process`` just lost its session: a violation unless a fault explains it."""
    world = process.world
    config = world.config
    if reason not in _LOSSES or config.premises or process.parent is not None:
        return  # premises break things on purpose; a child forked without hooks is a fault itself
    now = world.now
    since = now - config.lease - config.settle
    if since < 0 or any(
        (episode.seat in (None, process.seat) or episode.kind in _ANY_PROCESS)
        and episode.touches(since, now, config.settle)
        for episode in world.episodes
    ):
        return
    world.checker.violate(
        CALM_LOSS,
        f"{process.label} lost its session ({reason.value}) with no fault since {since:.3f}"
        f" (backend sessions capped at {world.model.max_session} s)",
        (CALM_LOSS, process.label, round(now, 3)),
    )
