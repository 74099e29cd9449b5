"""The Redis Cluster store: route by hash slot.

Every script touches the keys of one hash slot. A call runs the script of the
session's hash slot first, then one script per hash slot of the remaining keys. Those later
scripts may run long after the first (a starved thread, a driver holding commands
while it reconnects) on nodes whose clocks differ from the session node's, so only
durations cross nodes, measured on this process's local clock (``spi.clock``, which counts a
suspend of the host as the nodes' clocks do):

* acquire / join grant one full session lease on the lease (group) node's own clock.
  A keep-alive running between the session call and the grant extends the session
  but not a lease the session does not hold yet; the full lease covers the deadline
  that keep-alive reported. The attempt is recorded in the session's index first
  (scored by the session node's time), so that keep-alive reports the term as soon
  as it is granted and does not drop the entry while the grant is in flight: an entry
  not held is dropped only one lease after its last attempt.
* keep-alive's later scripts carry the session's new remaining time minus the time
  measured since the session call answered; a node extends nothing beyond its own
  now plus that. The later scripts go out as one pipeline per node, written to every
  node before any reply is read: round trips stay constant per node, not per lease.
* acquire / join send nothing once the session's remaining time has passed since the
  session call was sent; a grant answering later than that is given back, and the call
  fails with BackendTimeout.
* every hash slot has a marker of its own (``lua/_marker.lua``), since a node can lose its
  data alone and a script reaches one hash slot only. A grant that finds its hash slot's marker
  missing or stale holds new terms back, and the store then runs ``mark`` on every primary
  for the hash slots it serves: every hash slot of a node that lost its data holds back from about
  the same moment, and none pays again at its first use later.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from redis.crc import REDIS_CLUSTER_HASH_SLOTS

from ...spi import BackendTimeout, Grant, LeaseInfo, Member, Released, Renewal, SessionExpired
from ...spi.clock import local_clock
from .holdback import AT_GRANT, HELD_BACK, HoldBacks, at_keep_alive
from .keys import (
    group_key,
    hash_slot_marker_key,
    hash_slot_of,
    lease_key,
    marker_key,
    session_groups_key,
    session_key,
    session_keys,
    session_leases_key,
)
from .scripting import Call, ClusterScripting
from .scripts import (
    CLUSTER_FREE,
    CLUSTER_GRANT,
    CLUSTER_JOIN,
    CLUSTER_LEAVE,
    CLUSTER_RELEASE,
    CLUSTER_RENEW,
    GROUP_READ,
    LEASES_READ,
    MARK,
    SESSION_ATTEMPT,
    SESSION_CLOSE,
    SESSION_DROP_STALE,
    SESSION_RENEW,
    Script,
)
from .store import BaseStore, released, seconds

EXPIRED, REFUSED, HELD, NEW_TERM = -1, 0, 1, 2

logger = logging.getLogger("django_simba.backends.redis")


class ClusterStore(BaseStore):
    scripting: ClusterScripting

    def __init__(
        self,
        scripting: ClusterScripting,
        *,
        timeout: float,
        clock: Callable[[], float] = local_clock,
    ) -> None:
        super().__init__(scripting, timeout=timeout)
        self.clock = clock
        #: Test hook, called with the step a call reached: ``acquire:attempted`` / ``join:attempted``
        #: (session call answered, nothing sent yet), ``acquire:granted`` / ``join:granted`` (grant
        #: answered), ``keep_alive:renewed`` (session call answered, leases not sent yet).
        self.on_step: Callable[[str], None] | None = None
        self.hold_backs = HoldBacks(clock)

    # -- sessions ---------------------------------------------------------------------------

    def keep_alive(self, session_id: str, lease_ms: int) -> Renewal:
        sent = self.clock()
        keys = session_keys(session_id)
        live, lease, lease_entries, group_entries = self.scripting.run(
            SESSION_RENEW, [*keys, hash_slot_marker_key(keys[0])], [lease_ms]
        )
        answered = self.clock()
        self._step("keep_alive:renewed")
        names, groups = _entries(lease_entries), _entries(group_entries)
        if not int(live):
            if int(lease) > 0:  # held back: the session's node lost its data, and the session with it
                self._held_back(keys[0], int(lease), at_keep_alive(session_id, live=False))
            try:
                # its hash may have been evicted early: live leases are left to expire on their own
                self._free_what_is_left(session_id, list(names), list(groups), expired_only=True)
            except Exception as error:  # the session is gone either way; its leases expire on their own
                logger.debug("django-simba: cleaning up expired session %s failed: %s", session_id, error)
            raise SessionExpired(session_id)
        if not names and not groups:
            return Renewal(seconds(lease), {})
        self._check_budget(sent, "keep-alive")
        remaining_ms = int(lease) - _ms(self.clock() - answered)
        if remaining_ms <= 0:
            raise BackendTimeout(f"keep-alive of {session_id}: the session's lease ran out before its leases")
        calls, layout = self._hash_slot_calls(
            CLUSTER_RENEW, session_id, list(names), list(groups), [remaining_ms, int(lease)], marked=True
        )
        results = self.scripting.run_many(calls)
        owned: dict[str, int] = {}
        stale_names: list[str] = []
        stale_groups: list[str] = []
        for (names_here, groups_here), reply in zip(layout, results):
            held_back = int(reply[len(names_here) + len(groups_here)])
            if held_back > 0:  # the hash slot lost its data within a lease: its terms here are over
                noticed = at_keep_alive(session_id, live=True)
                self._held_back(lease_key(names_here[0]), held_back, noticed)
            for name, token in zip(names_here, reply):
                if int(token) > 0:
                    owned[name] = int(token)
                elif names[name]:
                    stale_names.append(name)
            for group, member in zip(groups_here, reply[len(names_here) :]):
                if not int(member) and groups[group]:
                    stale_groups.append(group)
        if stale_names or stale_groups:
            # lost entries whose last attempt is older than one lease: no grant can be in flight
            self.scripting.run(
                SESSION_DROP_STALE,
                [session_leases_key(session_id), session_groups_key(session_id)],
                [int(lease), len(stale_names), *stale_names, *stale_groups],
            )
        return Renewal(seconds(lease), owned)

    def close_session(self, session_id: str) -> None:
        sent = self.clock()
        names, groups = self.scripting.run(SESSION_CLOSE, session_keys(session_id))
        self._check_budget(sent, "close")
        self._free_what_is_left(session_id, list(names), list(groups), expired_only=False)

    def _free_what_is_left(
        self, session_id: str, names: list[str], groups: list[str], *, expired_only: bool
    ) -> None:
        """Free leases and memberships, then drop the indexes: a repeated close finishes the job.

        ``expired_only``: free only the leases whose own expiry has passed (the session was found gone).
        """
        if names or groups:
            calls, _ = self._hash_slot_calls(CLUSTER_FREE, session_id, names, groups, [int(expired_only)])
            self.scripting.run_many(calls)
        self.scripting.command("DEL", session_leases_key(session_id), session_groups_key(session_id))

    # -- leases -------------------------------------------------------------------------------

    def acquire(self, session_id: str, name: str, wait: bool = False) -> Grant | None:
        """``wait`` changes nothing: a release cannot hand the name over (the waiter's keys are elsewhere)."""
        sent = self.clock()
        session_ms, lease_ms = self._attempt(session_id, session_leases_key(session_id), name, "acquire")
        key = lease_key(name)
        reply = self.scripting.run(CLUSTER_GRANT, [key, hash_slot_marker_key(key)], [session_id, lease_ms])
        self._step("acquire:granted")
        status = int(reply[0])
        if status == REFUSED:
            return None
        if status == HELD_BACK:
            self._held_back(key, int(reply[1]))
            if int(reply[2]):  # this grant began the epoch: every hash slot of the node from now on
                self._mark_every_node(lease_ms)
            return None
        token, lease_remaining_ms = int(reply[1]), int(reply[2])
        if _ms(self.clock() - sent) >= session_ms:
            if status == NEW_TERM:
                self.scripting.run(CLUSTER_RELEASE, [lease_key(name)], [session_id, token])
            raise BackendTimeout(f"acquire of {name!r} answered after its session's remaining time")
        return Grant(name, token, seconds(min(session_ms, lease_remaining_ms)))

    def release(self, session_id: str, name: str, token: int = 0) -> Released:
        sent = self.clock()
        if token:
            # Only that term: a newer term of the session keeps its index entry (and its renewals).
            reply = self.scripting.run(CLUSTER_RELEASE, [lease_key(name)], [session_id, token])
            if int(reply):
                self._check_budget(sent, "release")
                self.scripting.command("ZREM", session_leases_key(session_id), name)
            return released(reply)
        self.scripting.command("ZREM", session_leases_key(session_id), name)
        self._check_budget(sent, "release")
        return released(self.scripting.run(CLUSTER_RELEASE, [lease_key(name)], [session_id, 0]))

    def owner(self, name: str) -> LeaseInfo | None:
        rows = self.scripting.run(LEASES_READ, [lease_key(name)])
        if not rows:
            return None
        _, holder, token, remaining = rows[0]
        # the session hash may already be gone while the lease outlives it by a delay: empty metadata
        metadata = self.scripting.read_metadata([holder]).get(holder) or ""
        return LeaseInfo(name, holder, int(token), seconds(remaining), metadata)

    # -- groups ----------------------------------------------------------------------------------

    def join(self, session_id: str, group: str) -> None:
        sent = self.clock()
        session_ms, lease_ms = self._attempt(session_id, session_groups_key(session_id), group, "join")
        added = int(self.scripting.run(CLUSTER_JOIN, [group_key(group)], [session_id, lease_ms]))
        self._step("join:granted")
        if _ms(self.clock() - sent) >= session_ms:
            if added:
                self.scripting.run(CLUSTER_LEAVE, [group_key(group)], [session_id])
            raise BackendTimeout(f"join of {group!r} answered after its session's remaining time")

    def leave(self, session_id: str, group: str) -> None:
        sent = self.clock()
        self.scripting.command("ZREM", session_groups_key(session_id), group)
        self._check_budget(sent, "leave")
        self.scripting.run(CLUSTER_LEAVE, [group_key(group)], [session_id])

    def members(self, group: str) -> list[Member]:
        session_ids = list(self.scripting.run(GROUP_READ, [group_key(group)]))
        metadata = self.scripting.read_metadata(session_ids)
        # a member whose session hash is gone is not live, whatever its score says
        return [Member(sid, md) for sid, md in metadata.items() if md is not None]

    # -- the markers -----------------------------------------------------------------------------

    def mark(self, hold_back_ms: int) -> int:
        """Run ``mark`` on every primary over the markers of its hash slots; how many epochs it began."""
        nodes = self.scripting.client.nodes_manager
        by_node: dict[str, list[str]] = defaultdict(list)
        for hash_slot in range(REDIS_CLUSTER_HASH_SLOTS):
            by_node[nodes.get_node_from_slot(hash_slot).name].append(marker_key(hash_slot))
        calls = [Call(MARK, keys[:1], [hold_back_ms, *keys[1:]]) for keys in by_node.values()]
        return sum(int(began) for began in self.scripting.run_many(calls))

    def _held_back(self, key: str, remaining_ms: int, noticed: str = AT_GRANT) -> None:
        """The hash slot of ``key`` holds new terms back: warn (once per hold-back, ``holdback.py``)."""
        node = self.scripting.client.get_node_from_key(key).name
        self.hold_backs.held_back(f"Redis Cluster node {node}", remaining_ms, noticed)

    def _mark_every_node(self, lease_ms: int) -> None:
        try:
            self.mark(lease_ms)
        except Exception as error:  # each hash slot still holds back on its own at its first grant
            logger.warning("django-simba: marking the hash slots of every node failed: %s", error)

    # -- helpers ---------------------------------------------------------------------------------

    def _attempt(self, session_id: str, index_key: str, entry: str, what: str) -> tuple[int, int]:
        """The session call of an acquire / join: (session remaining ms, lease ms), or SessionExpired."""
        sent = self.clock()
        reply = self.scripting.run(SESSION_ATTEMPT, [session_key(session_id), index_key], [entry])
        if int(reply[0]) == EXPIRED:
            raise SessionExpired(session_id)
        session_ms, lease_ms = int(reply[1]), int(reply[2])
        self._step(f"{what}:attempted")
        if _ms(self.clock() - sent) >= session_ms:
            raise BackendTimeout(f"{what} of {entry!r}: the session's remaining time passed; nothing sent")
        self._check_budget(sent, what)
        return session_ms, lease_ms

    def _step(self, step: str) -> None:
        if self.on_step is not None:
            self.on_step(step)

    def _check_budget(self, sent: float, what: str) -> None:
        if self.clock() - sent > self.timeout:
            raise BackendTimeout(f"{what} took longer than {self.timeout:g} s; the rest was not sent")

    def _hash_slot_calls(
        self,
        script: Script,
        session_id: str,
        names: Sequence[str],
        groups: Sequence[str],
        extra: Sequence[int],
        *,
        marked: bool = False,
    ) -> tuple[list[Call], list[tuple[list[str], list[str]]]]:
        """One call of ``script`` per hash slot: KEYS = the hash slot's lease keys then its group keys.

        ``marked``: then the hash slot's marker (last).
        """
        by_hash_slot: dict[int, tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
        for name in names:
            by_hash_slot[hash_slot_of(lease_key(name))][0].append(name)
        for group in groups:
            by_hash_slot[hash_slot_of(group_key(group))][1].append(group)
        calls, layout = [], []
        for hash_slot, (names_here, groups_here) in by_hash_slot.items():
            keys = [lease_key(n) for n in names_here] + [group_key(g) for g in groups_here]
            if marked:
                keys.append(marker_key(hash_slot))
            calls.append(Call(script, keys, [session_id, *extra, len(names_here)]))
            layout.append((names_here, groups_here))
        return calls, layout


def _entries(flat: Sequence[Any]) -> dict[str, bool]:
    """{entry: stale} from the flat {entry, stale, ...} a session script returns."""
    return {str(entry): bool(int(stale)) for entry, stale in zip(flat[0::2], flat[1::2])}


def _ms(elapsed: float) -> int:
    """Elapsed seconds as whole milliseconds, rounded up (a shorter remaining time is the safe side)."""
    return int(elapsed * 1000) + 1
