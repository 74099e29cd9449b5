"""The Redis key layout, in one place for Python and the Lua scripts.

The braces are literal: they are Redis Cluster hash tags. A lease key hashes on the
lease name, a group key on the group name, and the three keys of a session on its
id, so a session's hash and its two indexes always share one hash slot. Names cannot
contain braces (design: Rules, names), so the tag is exactly the name.

Channels are the keys themselves: a release publishes on its lease key, a group
change on its group key, a hand-over on the session key of the session that got the name.

The marker (``lua/_marker.lua``) is one hash per database on a single node, and one per
hash slot on a cluster, where a script reaches the keys of one hash slot only: the marker of a
hash slot is ``simba:marker:{<tag>}`` with the shortest tag that hashes to that hash slot.
"""

from __future__ import annotations

import functools
from pathlib import Path

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

LEASE_PREFIX = "simba:lease:{"
SESSION_PREFIX = "simba:session:{"
GROUP_PREFIX = "simba:group:{"
LEASE_INDEX_SUFFIX = ":leases"
GROUP_INDEX_SUFFIX = ":groups"
LINE_SUFFIX = ":line"
MARKER_KEY = "simba:marker"
MARKER_PREFIX = "simba:marker:{"

#: A lease hash expires this long after its term was ended (released, freed with its session,
#: force-released) unless a new term begins: an idle name then costs nothing, and its next term
#: takes its token from the clock, above every earlier one. A held hash never expires.
IDLE_LEASE_MS = 60_000

RELEASED = "released"
HANDED_OVER = "handed"  # on the session's channel, followed by the token and the name
CHANGED = "changed"


def lease_key(name: str) -> str:
    """Hash: ``session`` (empty when free), ``token``, ``expires`` (ms, Redis time); expires once idle."""
    return f"{LEASE_PREFIX}{name}}}"


def line_key(name: str) -> str:
    """Sorted set of the sessions waiting for a lease, scored in the order they joined it.

    Same hash slot as the lease; its suffix keeps it out of the lease key pattern of ``scan_pattern``.
    """
    return lease_key(name) + LINE_SUFFIX


def session_key(session_id: str) -> str:
    """Hash with PX = lease: ``metadata``, ``expires`` (ms, Redis time), ``lease`` (ms)."""
    return f"{SESSION_PREFIX}{session_id}}}"


def session_leases_key(session_id: str) -> str:
    """The session's lease index (same hash slot as the session)."""
    return session_key(session_id) + LEASE_INDEX_SUFFIX


def session_groups_key(session_id: str) -> str:
    """The session's group index (same hash slot as the session)."""
    return session_key(session_id) + GROUP_INDEX_SUFFIX


def session_keys(session_id: str) -> tuple[str, str, str]:
    return session_key(session_id), session_leases_key(session_id), session_groups_key(session_id)


def group_key(group: str) -> str:
    """Sorted set of member session ids scored by their expiry (ms, Redis time)."""
    return f"{GROUP_PREFIX}{group}}}"


def tagged(key: str, prefix: str) -> str | None:
    """The name inside ``prefix{name}``, or None when ``key`` is not such a key."""
    if key.startswith(prefix) and key.endswith("}"):
        return key[len(prefix) : -1]
    return None


def scan_pattern(prefix: str, name_prefix: str) -> str:
    """SCAN MATCH pattern for the keys under ``prefix`` whose name starts with ``name_prefix``.

    Valid names and prefixes hold none of the glob characters ``*?[]\\``, so no escaping is needed.
    """
    return f"{prefix}{name_prefix}*}}"


def hash_slot_of(key: str) -> int:
    """The Redis Cluster hash slot of ``key`` (honouring the hash tag)."""
    return int(key_slot(key.encode()))


#: One tag per hash hash_slot, in hash slot order (made by :func:`search_hash_slot_tags`; a test checks it).
HASH_SLOT_TAGS_FILE = Path(__file__).with_name("hash_slot_tags.txt")


@functools.cache
def _hash_slot_tags() -> tuple[str, ...]:
    """For each hash hash_slot, the tag its marker key carries: read once (the search takes 0.1-0.5 s of
    CPU, which, run at a process's first grant, made its keep-alive late under load)."""
    return tuple(HASH_SLOT_TAGS_FILE.read_text(encoding="ascii").split())


def search_hash_slot_tags() -> tuple[str, ...]:
    """For each hash hash_slot, the first hexadecimal number whose hash is that hash slot."""
    tags: list[str | None] = [None] * REDIS_CLUSTER_HASH_SLOTS
    missing, number = REDIS_CLUSTER_HASH_SLOTS, 0
    while missing:
        tag = format(number, "x")
        hash_slot = key_slot(tag.encode())
        if tags[hash_slot] is None:
            tags[hash_slot] = tag
            missing -= 1
        number += 1
    return tuple(tag for tag in tags if tag is not None)


def marker_key(hash_slot: int) -> str:
    """The marker of one hash slot of a cluster."""
    return f"{MARKER_PREFIX}{_hash_slot_tags()[hash_slot]}}}"


def hash_slot_marker_key(key: str) -> str:
    """The marker of the hash slot ``key`` hashes to."""
    return marker_key(hash_slot_of(key))
