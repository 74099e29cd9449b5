"""A model backend that loses its data, with the rules of the Redis scripts that keep it safe.

The real scripts (``backends/redis/lua/_marker.lua``) keep a marker that vanishes with the data
(a restart without persistence, FLUSHALL, a failover to a replica, which never has it). A grant
that finds no marker begins an epoch: no new term (by acquire or hand-over) for the longest lease
known, so that no holder of a forgotten term still trusts it, and a token older than the epoch
(or none) is replaced by the server clock's microseconds. :class:`ForgetfulMemoryBackend` keeps
the same rules over the memory model, and can lose its data in two ways:

* :meth:`~ForgetfulMemoryBackend.lose_everything`: every session, lease, line and the marker;
* :meth:`~ForgetfulMemoryBackend.stop_replica` then :meth:`~ForgetfulMemoryBackend.fail_over`:
  the state as it was when the replica stopped receiving writes comes back, without the marker.

With ``rules=False`` it is the backend as it was before them (tokens start again at 1, nothing
is held back), which the simulation must catch breaking its invariants.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...backends.memory import LineMemoryBackend, MemoryBackend
from ...backends.memory.backend import _Lease
from ...spi import Notification, NotificationKind, OpenedSession, Renewal
from .config import HandOver, Premise, SimulationConfig
from .faults import FaultKind

if TYPE_CHECKING:
    from .world import World

MICROSECONDS = 1_000_000
#: The episodes in which the backend forgets (planned by ``faults.py``, carried out here).
FORGETTING = frozenset({FaultKind.DATA_LOST, FaultKind.STALE_FAILOVER})


@dataclass
class Marker:
    """The server's record that it holds every write it made (see ``_marker.lua``)."""

    since: int  # the epoch's start, microseconds of the backend's clock
    until: float  # no new term before this (backend seconds)
    longest: float  # the longest lease of a grant since the epoch began


class ForgetfulMemoryBackend(MemoryBackend):
    """The memory model with Redis's rules for a server that forgets (``rules``: on)."""

    def __init__(
        self, options: Mapping[str, Any] | None = None, *, rules: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(options, **kwargs)
        self.rules = rules
        self.marker: Marker | None = None
        self.hold_backs = 0  # epochs begun: each held new terms back
        self._last_us = 0  # the backend host's clock, which outlives the data
        self._session_leases: dict[str, float] = {}
        self._replica: dict[str, Any] | None = None

    # -- the server's clock ----------------------------------------------------------------

    def _micros(self) -> int:
        """The clock's microseconds, one more at least for each call (a script takes that long)."""
        self._last_us = max(int(self._clock() * MICROSECONDS), self._last_us + 1)
        return self._last_us

    def mark(self) -> None:
        """A fresh server marked as complete, as a test fixture does: nothing held back."""
        with self._mutex:
            self.marker = Marker(self._micros(), 0.0, 0.0)

    # -- the rules -------------------------------------------------------------------------

    def _epoch(self, session_id: str, now: float) -> Marker:
        """The marker, begun anew (holding new terms back) when it is missing; as ``epoch`` in Lua."""
        lease = self._session_leases.get(session_id, 0.0)
        marker = self.marker
        if marker is None:
            marker = self.marker = Marker(self._micros(), now + lease, lease)
            self.hold_backs += 1
        elif lease > marker.longest:
            if marker.until > now:
                marker.until = max(marker.until, marker.since / MICROSECONDS + lease)
            marker.longest = lease
        return marker

    def _held_back(self, session_id: str, now: float) -> bool:
        return self.rules and self._epoch(session_id, now).until > now

    def _current(self, lease: _Lease, session_id: str, now: float) -> bool:
        """A term granted before the epoch is over: its end, and what came after, may be lost."""
        return not self.rules or lease.token >= self._epoch(session_id, now).since

    def _next_token(self, lease: _Lease) -> int:
        token = lease.token + 1
        if self.rules and self.marker is not None and token <= self.marker.since:
            return self._micros()
        return token

    # -- what the rules read: each session's lease -------------------------------------------

    def _open_session(self, lease_duration: float, metadata: str) -> OpenedSession:
        opened = super()._open_session(lease_duration, metadata)
        with self._mutex:
            self._session_leases[opened.session_id] = lease_duration
        return opened

    def _keep_alive(self, session_id: str, lease_duration: float) -> Renewal:
        renewal = super()._keep_alive(session_id, lease_duration)
        with self._mutex:
            self._session_leases[session_id] = lease_duration
        return renewal

    # -- losing the data -------------------------------------------------------------------

    def lose_everything(self) -> None:
        """A restart without persistence, FLUSHALL, a failover to an empty replica."""
        with self._mutex:
            super().lose_everything()
            self.marker = None
            self._session_leases.clear()
            self._replica = None

    def _state(self) -> dict[str, Any]:
        return {
            "_session_rows": self._session_rows,
            "_lease_rows": self._lease_rows,
            "_member_sets": self._member_sets,
            "_lines": self._lines,
            "_evicted": self._evicted,
            "_session_leases": self._session_leases,
        }

    def stop_replica(self) -> None:
        """The replica stops receiving writes: it keeps the state of now."""
        with self._mutex:
            self._replica = copy.deepcopy(self._state())

    def fail_over(self) -> bool:
        """The stopped replica becomes the server: the writes since it stopped are lost, and the marker
        (never replicated) too. False when no replica was stopped."""
        with self._mutex:
            replica, self._replica = self._replica, None
            if replica is None:
                return False
            for attribute, value in replica.items():
                setattr(self, attribute, value)
            self.marker = None
            return True


def model_for(config: SimulationConfig, mode: HandOver, **kwargs: Any) -> MemoryBackend:
    """The run's model backend: a ZooKeeper-like line that never forgets, or a Redis-like one that can.

    The Redis-like one starts marked, as a test fixture's server does, and keeps the rules unless
    the run turns them off (``redis_rules``) or breaks them on purpose (``Premise.TOKEN_RESET``).
    """
    if mode is HandOver.ALWAYS:
        return LineMemoryBackend(**kwargs)
    rules = config.redis_rules and Premise.TOKEN_RESET not in config.premises
    model = ForgetfulMemoryBackend(rules=rules, **kwargs)
    model.mark()
    return model


def forgetting_begins(world: World, kind: FaultKind) -> None:
    model = world.model
    if not isinstance(model, ForgetfulMemoryBackend):
        return  # a quorum keeps the data of a ZooKeeper-like run
    if kind is FaultKind.DATA_LOST:
        world.backend_down = True
        model.lose_everything()
        world.faults["data lost"] += 1
        world.trace.add(world.now, "BACKEND", "LOST ITS DATA, down until it is back")
    else:
        model.stop_replica()
        world.trace.add(world.now, "BACKEND", "replica stops receiving writes")


def forgetting_ends(world: World, kind: FaultKind) -> None:
    model = world.model
    if not isinstance(model, ForgetfulMemoryBackend):
        return
    if kind is FaultKind.DATA_LOST:
        world.backend_down = False
    elif not model.fail_over():
        return
    else:
        world.faults["failover to a stale replica"] += 1
        world.trace.add(world.now, "BACKEND", "FAILED OVER to the replica that missed the last writes")
    world.notify(Notification(NotificationKind.RESYNC))  # the channel reconnected
