"""The Redis key layout, in one place for Python and the Lua scripts.

The braces are literal: they are Redis Cluster hash tags. A lease key hashes on the
lease name, a group key on the group name, and the three keys of a session on its
id, so a session's hash and its two indexes always share one slot. Names cannot
contain braces (design: Rules, names), so the tag is exactly the name.

Channels are the keys themselves: a release publishes on its lease key, a group
change on its group key, a hand-over on the session key of the session that got the name.
"""

from __future__ import annotations

from redis.crc import key_slot

LEASE_PREFIX = "simba:lease:{"
SESSION_PREFIX = "simba:session:{"
GROUP_PREFIX = "simba:group:{"
LEASE_INDEX_SUFFIX = ":leases"
GROUP_INDEX_SUFFIX = ":groups"
LINE_SUFFIX = ":line"

RELEASED = "released"
HANDED_OVER = "handed"  # on the session's channel, followed by the token and the name
CHANGED = "changed"


def lease_key(name: str) -> str:
    """Hash that never expires: ``session`` (empty when free), ``token``, ``expires`` (ms, Redis time)."""
    return f"{LEASE_PREFIX}{name}}}"


def line_key(name: str) -> str:
    """Sorted set of the sessions waiting for a lease, scored in the order they joined it.

    Same slot as the lease; its suffix keeps it out of the lease key pattern of ``scan_pattern``.
    """
    return lease_key(name) + LINE_SUFFIX


def session_key(session_id: str) -> str:
    """Hash with PX = lease: ``metadata``, ``expires`` (ms, Redis time), ``lease`` (ms)."""
    return f"{SESSION_PREFIX}{session_id}}}"


def session_leases_key(session_id: str) -> str:
    """The session's lease index (same slot as the session)."""
    return session_key(session_id) + LEASE_INDEX_SUFFIX


def session_groups_key(session_id: str) -> str:
    """The session's group index (same slot as the session)."""
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


def slot_of(key: str) -> int:
    """The Redis Cluster hash slot of ``key`` (honouring the hash tag)."""
    return int(key_slot(key.encode()))
