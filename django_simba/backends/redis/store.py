"""What the single-node and the cluster stores share: sessions, listing, purge, force-release.

A store turns SPI operations into script calls; the backend wraps every store call in
error translation. Listing scans keys (``SCAN``, on every primary of a cluster) and
reads what it found in batches, one script per hash_slot, so status tools never block
the server for long.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar

from ...spi import LeaseInfo, Member, OpenedSession, Released, SessionInfo
from .keys import (
    GROUP_PREFIX,
    LEASE_PREFIX,
    SESSION_PREFIX,
    group_key,
    hash_slot_of,
    lease_key,
    scan_pattern,
    session_key,
    tagged,
)
from .scripting import Call, Scripting
from .scripts import FORCE_RELEASE, GROUP_PURGE, LEASES_IDLE, LEASES_READ, OPEN_SESSION, SESSIONS_READ, Script

BATCH = 500
T = TypeVar("T")

#: What the release scripts answer: the name was not the session's term (force-released, taken
#: over, freed before), it freed a term of the session whose expiry had passed, it freed a live term.
NOT_HELD, FREED_EXPIRED, FREED_LIVE = 0, 1, 2


def seconds(ms: float) -> float:
    return float(ms) / 1000.0


def released(reply: Any) -> Released:
    """A release script's answer as the SPI's reply."""
    return Released(held=int(reply) == FREED_LIVE)


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


class BaseStore:
    def __init__(self, scripting: Scripting, *, timeout: float) -> None:
        self.scripting = scripting
        self.timeout = timeout

    # -- sessions -----------------------------------------------------------------------

    def open_session(self, lease_ms: int, metadata: str) -> OpenedSession:
        session_id = uuid.uuid4().hex
        lease = self.scripting.run(OPEN_SESSION, [session_key(session_id)], [lease_ms, metadata])
        return OpenedSession(session_id, seconds(lease))

    def sessions(self) -> list[SessionInfo]:
        found = []
        found_ids = self._scan_names(SESSION_PREFIX, "")
        for sids, rows in self._read_by_hash_slot(SESSIONS_READ, found_ids, session_key):
            for index, metadata, remaining in rows:
                found.append(SessionInfo(sids[int(index) - 1], seconds(remaining), metadata))
        return found

    # -- leases ---------------------------------------------------------------------------

    def force_release(self, name: str) -> bool:
        return bool(self.scripting.run(FORCE_RELEASE, [lease_key(name)]))

    def live_leases(self, names: Iterable[str]) -> list[tuple[str, str, int, float]]:
        """(name, session id, token, remaining s) of every live lease among ``names``."""
        found = []
        for chunk, rows in self._read_by_hash_slot(LEASES_READ, names, lease_key):
            for index, holder, token, remaining in rows:
                found.append((chunk[int(index) - 1], holder, int(token), seconds(remaining)))
        return found

    def leases(self, prefix: str) -> list[LeaseInfo]:
        held = self.live_leases(self._scan_names(LEASE_PREFIX, prefix))
        metadata = self.scripting.read_metadata(sorted({holder for _, holder, _, _ in held}))
        return [
            LeaseInfo(name, holder, token, remaining, metadata.get(holder) or "")
            for name, holder, token, remaining in held
        ]

    # -- groups ------------------------------------------------------------------------------

    def members(self, group: str) -> list[Member]:  # pragma: no cover - overridden
        raise NotImplementedError

    def groups(self, prefix: str) -> dict[str, list[Member]]:
        return {group: self.members(group) for group in self._scan_names(GROUP_PREFIX, prefix)}

    def purge_expired(self, limit: int) -> int:
        """Sessions expire on their own (PX); what is left of crashed ones is their group entries.

        And the lease hashes of names they held: a hash expires once its term was ended, but
        nobody ends the term of a holder that crashed. Those (and hashes left by a version
        before hashes expired) get the idle time here. Returns the sessions purged.
        """
        purged: set[str] = set()
        for group in self._scan_names(GROUP_PREFIX, ""):
            if len(purged) >= limit:
                break
            purged.update(self.scripting.run(GROUP_PURGE, [group_key(group)], [limit - len(purged)]))
        self.expire_idle_leases()
        return min(len(purged), limit)

    def expire_idle_leases(self) -> int:
        """Give every lease hash whose term is over and that never expires the idle time; how many."""
        names = self._scan_names(LEASE_PREFIX, "")
        replies: list[Any] = [given for _, given in self._read_by_hash_slot(LEASES_IDLE, names, lease_key)]
        return sum(int(given) for given in replies)

    # -- helpers ------------------------------------------------------------------------------

    def _scan_names(self, prefix: str, name_prefix: str) -> list[str]:
        names = (tagged(key, prefix) for key in self.scripting.scan(scan_pattern(prefix, name_prefix)))
        return sorted({name for name in names if name is not None})

    def _partition(self, names: Iterable[str], key_of: Any) -> list[list[str]]:
        """Names whose keys one script may touch together: those of one hash slot."""
        by_hash_slot: dict[int, list[str]] = defaultdict(list)
        for name in names:
            by_hash_slot[hash_slot_of(key_of(name))].append(name)
        return list(by_hash_slot.values())

    def _read_by_hash_slot(
        self, script: Script, names: Iterable[str], key_of: Any
    ) -> Iterator[tuple[Sequence[str], list[Any]]]:
        """Run ``script`` over the keys of ``names`` in batches, in pipelines of up to BATCH calls."""
        chunks = [chunk for group in self._partition(names, key_of) for chunk in batched(group, BATCH)]
        for calls in batched(chunks, BATCH):
            replies = self.scripting.run_many([Call(script, [key_of(n) for n in c], ()) for c in calls])
            yield from zip(calls, replies)
