"""The Redis Cluster store: route by slot.

Every script touches the keys of one hash slot. A call runs the script of the
session's slot first, then one script per slot of the remaining keys. Those later
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
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from ...spi import BackendTimeout, Grant, LeaseInfo, Member, Released, Renewal, SessionExpired
from ...spi.clock import local_clock
from .keys import (
    group_key,
    lease_key,
    session_groups_key,
    session_key,
    session_keys,
    session_leases_key,
    slot_of,
)
from .scripting import Call, ClusterScripting
from .scripts import (
    GROUP_READ,
    LEASES_READ,
    SESSION_ATTEMPT,
    SESSION_CLOSE,
    SESSION_DROP_STALE,
    SESSION_RENEW,
    SLOT_FREE,
    SLOT_GRANT,
    SLOT_JOIN,
    SLOT_LEAVE,
    SLOT_RELEASE,
    SLOT_RENEW,
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

    # -- sessions ---------------------------------------------------------------------------

    def keep_alive(self, session_id: str, lease_ms: int) -> Renewal:
        sent = self.clock()
        live, lease, lease_entries, group_entries = self.scripting.run(
            SESSION_RENEW, session_keys(session_id), [lease_ms]
        )
        answered = self.clock()
        self._step("keep_alive:renewed")
        names, groups = _entries(lease_entries), _entries(group_entries)
        if not int(live):
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
        calls, layout = self._slot_calls(SLOT_RENEW, session_id, list(names), list(groups), [remaining_ms])
        results = self.scripting.run_many(calls)
        owned: dict[str, int] = {}
        stale_names: list[str] = []
        stale_groups: list[str] = []
        for (slot_names, slot_groups), reply in zip(layout, results):
            for name, token in zip(slot_names, reply):
                if int(token) > 0:
                    owned[name] = int(token)
                elif names[name]:
                    stale_names.append(name)
            for group, member in zip(slot_groups, reply[len(slot_names) :]):
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
            calls, _ = self._slot_calls(SLOT_FREE, session_id, names, groups, [int(expired_only)])
            self.scripting.run_many(calls)
        self.scripting.command("DEL", session_leases_key(session_id), session_groups_key(session_id))

    # -- leases -------------------------------------------------------------------------------

    def acquire(self, session_id: str, name: str, wait: bool = False) -> Grant | None:
        """``wait`` changes nothing: a release cannot hand the name over (the waiter's keys are elsewhere)."""
        sent = self.clock()
        session_ms, lease_ms = self._attempt(session_id, session_leases_key(session_id), name, "acquire")
        reply = self.scripting.run(SLOT_GRANT, [lease_key(name)], [session_id, lease_ms])
        self._step("acquire:granted")
        status = int(reply[0])
        if status == REFUSED:
            return None
        token, lease_remaining_ms = int(reply[1]), int(reply[2])
        if _ms(self.clock() - sent) >= session_ms:
            if status == NEW_TERM:
                self.scripting.run(SLOT_RELEASE, [lease_key(name)], [session_id, token])
            raise BackendTimeout(f"acquire of {name!r} answered after its session's remaining time")
        return Grant(name, token, seconds(min(session_ms, lease_remaining_ms)))

    def release(self, session_id: str, name: str, token: int = 0) -> Released:
        sent = self.clock()
        if token:
            # Only that term: a newer term of the session keeps its index entry (and its renewals).
            reply = self.scripting.run(SLOT_RELEASE, [lease_key(name)], [session_id, token])
            if int(reply):
                self._check_budget(sent, "release")
                self.scripting.command("ZREM", session_leases_key(session_id), name)
            return released(reply)
        self.scripting.command("ZREM", session_leases_key(session_id), name)
        self._check_budget(sent, "release")
        return released(self.scripting.run(SLOT_RELEASE, [lease_key(name)], [session_id, 0]))

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
        added = int(self.scripting.run(SLOT_JOIN, [group_key(group)], [session_id, lease_ms]))
        self._step("join:granted")
        if _ms(self.clock() - sent) >= session_ms:
            if added:
                self.scripting.run(SLOT_LEAVE, [group_key(group)], [session_id])
            raise BackendTimeout(f"join of {group!r} answered after its session's remaining time")

    def leave(self, session_id: str, group: str) -> None:
        sent = self.clock()
        self.scripting.command("ZREM", session_groups_key(session_id), group)
        self._check_budget(sent, "leave")
        self.scripting.run(SLOT_LEAVE, [group_key(group)], [session_id])

    def members(self, group: str) -> list[Member]:
        session_ids = list(self.scripting.run(GROUP_READ, [group_key(group)]))
        metadata = self.scripting.read_metadata(session_ids)
        # a member whose session hash is gone is not live, whatever its score says
        return [Member(sid, md) for sid, md in metadata.items() if md is not None]

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

    def _slot_calls(
        self,
        script: Script,
        session_id: str,
        names: Sequence[str],
        groups: Sequence[str],
        extra: Sequence[int],
    ) -> tuple[list[Call], list[tuple[list[str], list[str]]]]:
        """One call of ``script`` per hash slot: KEYS = the slot's lease keys then its group keys."""
        by_slot: dict[int, tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
        for name in names:
            by_slot[slot_of(lease_key(name))][0].append(name)
        for group in groups:
            by_slot[slot_of(group_key(group))][1].append(group)
        calls, layout = [], []
        for slot_names, slot_groups in by_slot.values():
            keys = [lease_key(n) for n in slot_names] + [group_key(g) for g in slot_groups]
            calls.append(Call(script, keys, [session_id, *extra, len(slot_names)]))
            layout.append((slot_names, slot_groups))
        return calls, layout


def _entries(flat: Sequence[Any]) -> dict[str, bool]:
    """{entry: stale} from the flat {entry, stale, ...} a session script returns."""
    return {str(entry): bool(int(stale)) for entry, stale in zip(flat[0::2], flat[1::2])}


def _ms(elapsed: float) -> int:
    """Elapsed seconds as whole milliseconds, rounded up (a shorter remaining time is the safe side)."""
    return int(elapsed * 1000) + 1
