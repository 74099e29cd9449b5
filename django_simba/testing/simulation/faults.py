"""The fault schedule of a run: episodes drawn from the seed before the run starts.

An episode is one fault over a span of world time, aimed at one process seat (a
seat is a place in the cluster; a crashed process's successor takes its seat) or
at the backend. Episodes mostly follow one another with calm gaps between them,
sometimes overlap, and a crash is followed by a calm window as long as the
take-over bound, so that most take-overs can be held to it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

from .config import Premise, SimulationConfig


class FaultKind(Enum):
    LOSSY_NETWORK = "lossy network"  # a process's requests or replies are lost
    SLOW_NETWORK = "slow network"  # a process's requests or replies arrive past its timeout
    PAUSE = "pause"  # a process runs nothing (its clock goes on)
    CRASH = "crash"  # a process stops for good without closing; a new one takes its seat later
    BACKEND_RESTART = "backend restart"  # the backend refuses every call for a while, then comes back
    LATE_WRITES = "late writes"  # a process's writes to the fenced register arrive very late
    LOST_NOTIFICATIONS = "lost notifications"  # release notifications to a process are lost
    RESIGN = "resign"  # a leader closes its election (releasing the name) and stands again later
    SESSION_EVICTED = "session evicted"  # the backend drops a session's record early (Redis volatile-*)
    FORK = "fork without hooks"  # a child starts with a copy of its parent's engine (uWSGI), exits at the end
    RESTART = "graceful restart"  # a process closes its engine and exits; a successor starts at the end
    # the backend forgets (forgetful.py; a ZooKeeper-like run, whose data is replicated by quorum, does not)
    DATA_LOST = "data lost"  # down, then back empty: a restart without persistence, FLUSHALL
    STALE_FAILOVER = "stale failover"  # a replica stops receiving writes; at the end it takes over
    FORCE_RELEASE = "force release"  # an operator force-releases a shared handle's name (sharing.py)
    # premises: only when a run asks for them
    TOKEN_RESET = "token reset"
    CLOCK_STEP = "backend clock step"
    SESSIONS_LOST = "sessions lost"


PREMISE_EPISODES = {
    Premise.TOKEN_RESET: FaultKind.TOKEN_RESET,
    Premise.CLOCK_STEP: FaultKind.CLOCK_STEP,
    Premise.SESSIONS_LOST: FaultKind.SESSIONS_LOST,
    Premise.EVICTION_FREES_LEASES: FaultKind.SESSION_EVICTED,
}

#: How often a run injects a premise: an eviction breaks something only when another session is
#: quick to take what the evicted leader still trusts, so it comes five times.
PREMISE_REPEATS = {Premise.EVICTION_FREES_LEASES: 5}

#: Episodes aimed at the backend, not at a process seat.
BACKEND_KINDS = frozenset({FaultKind.BACKEND_RESTART, FaultKind.DATA_LOST, FaultKind.STALE_FAILOVER})

#: The share of runs that end with a calm tail long enough to check recovery.
RECOVERY_RUNS = 0.35

_WEIGHTS = {
    FaultKind.LOSSY_NETWORK: 3.0,
    FaultKind.SLOW_NETWORK: 2.0,
    FaultKind.PAUSE: 3.0,
    FaultKind.CRASH: 3.0,
    FaultKind.BACKEND_RESTART: 1.5,
    FaultKind.LATE_WRITES: 1.5,
    FaultKind.LOST_NOTIFICATIONS: 1.0,
    FaultKind.RESIGN: 2.0,
    FaultKind.SESSION_EVICTED: 1.0,
    FaultKind.FORK: 1.0,
    FaultKind.RESTART: 1.0,
    FaultKind.DATA_LOST: 1.0,
    FaultKind.STALE_FAILOVER: 1.0,
    FaultKind.FORCE_RELEASE: 1.0,
}

#: Episode length, as a fraction of the lease (drawn uniformly).
_LENGTHS = {
    FaultKind.LOSSY_NETWORK: (0.1, 1.2),
    FaultKind.SLOW_NETWORK: (0.2, 1.0),
    FaultKind.PAUSE: (0.3, 2.0),
    FaultKind.CRASH: (0.2, 1.0),  # until the successor starts
    FaultKind.BACKEND_RESTART: (0.05, 1.3),
    FaultKind.LATE_WRITES: (0.2, 1.0),
    FaultKind.LOST_NOTIFICATIONS: (0.3, 1.5),
    FaultKind.RESIGN: (0.02, 0.3),  # until it stands again
    FaultKind.SESSION_EVICTED: (0.0, 0.0),
    FaultKind.FORK: (0.3, 1.5),  # until the child exits
    FaultKind.RESTART: (0.1, 0.5),  # until the successor starts
    FaultKind.DATA_LOST: (0.01, 0.5),  # until it is back
    FaultKind.STALE_FAILOVER: (0.05, 1.0),  # the writes the replica misses
    FaultKind.FORCE_RELEASE: (0.0, 0.0),
}


@dataclass(frozen=True, slots=True)
class Episode:
    """``kind`` from ``start`` to ``end`` on process seat ``seat`` (None: the backend).

    ``strength`` means: the loss probability (lossy network), the delay as a multiple
    of the timeout (slow network), the delay as a multiple of the lease (late
    writes), the jump as a multiple of the lease (clock step).
    """

    start: float
    end: float
    kind: FaultKind
    seat: int | None = None
    strength: float = 0.0

    def touches(self, start: float, end: float, settle: float) -> bool:
        """Whether this episode or its after-effects (``settle`` long) overlap [start, end]."""
        return self.start <= end and start <= self.end + settle


def plan_faults(config: SimulationConfig, rng: random.Random) -> list[Episode]:
    """The episodes of a run, sorted by start; premises once each, at a random moment.

    About a third of the runs stop their faults early enough to check recovery at the
    end; the others fill the run with faults up to a take-over window before its end.
    """
    first = 2 * config.renew  # the first leaders are in place
    if rng.random() < RECOVERY_RUNS:
        last = config.duration - config.settle - config.recovery_bound
    else:
        last = config.duration - config.takeover_bound - config.renew
    kinds = [kind for kind in _WEIGHTS if kind.value not in config.without]
    weights = [_WEIGHTS[k] for k in kinds]
    episodes: list[Episode] = []
    t = first
    while kinds:
        t += rng.uniform(0.1, 0.8) * config.lease
        kind = rng.choices(kinds, weights)[0]
        low, high = _LENGTHS[kind]
        length = rng.uniform(low, high) * config.lease
        if t + length > last:
            break
        episodes.append(Episode(t, t + length, kind, _seat(kind, config, rng), _strength(kind, rng)))
        if kind is FaultKind.CRASH:
            t += max(length, config.takeover_bound + config.renew)
        elif rng.random() < 0.7:
            t += length  # else the next episode overlaps this one
    for premise, kind in PREMISE_EPISODES.items():
        if premise in config.premises:
            for _ in range(PREMISE_REPEATS.get(premise, 1)):
                at = rng.uniform(first, max(first, last))
                episodes.append(Episode(at, at, kind, None, rng.uniform(1.05, 2.0)))
    if Premise.DRIFT_EXCEEDED in config.premises:
        # Cut the slow process (seat 0) off for longer than a lease, so its clock decides alone.
        at = rng.uniform(first, max(first, last))
        episodes.append(Episode(at, at + 2 * config.lease, FaultKind.PAUSE, 0))
    episodes.sort(key=lambda e: (e.start, e.kind.value))
    return episodes


def _seat(kind: FaultKind, config: SimulationConfig, rng: random.Random) -> int | None:
    if kind in BACKEND_KINDS:
        return None
    return rng.randrange(config.processes)


def _strength(kind: FaultKind, rng: random.Random) -> float:
    if kind is FaultKind.LOSSY_NETWORK:
        return rng.uniform(0.2, 1.0)
    if kind is FaultKind.SLOW_NETWORK:
        return rng.uniform(0.3, 2.0)
    if kind is FaultKind.LATE_WRITES:
        return rng.uniform(0.5, 2.0)
    return 0.0
