"""Only the loader of the Lua scripts, which live in ``lua/*.lua`` inside this package.

Every decision about time is taken inside Redis with ``TIME``: times are integer
milliseconds of the clock of the node running the script. A lease is held when its
``session`` field is not empty and its ``expires`` is in the future; a session is live
while its hash exists with ``expires`` in the future. Each file starts with what its
KEYS and ARGV are and what it returns.

A script's source is the concatenation, in this order, of:

0. the script's ``#!lua`` line, if it has one (script flags must come first);
1. ``local`` constants written here from ``keys.py`` (key prefixes, channel messages, the
   idle time of a lease hash), so that Python and Lua share one key layout;
2. ``lua/_prelude.lua`` (``now_ms``, the key builders, ``session_expiry``, ``held_by``);
3. each fragment the script names on a line ``-- include: _<fragment>.lua`` (fragments
   start with ``_`` and include nothing themselves);
4. the script's own file, unchanged.

Nothing else is substituted. Each script is registered once: its SHA1 is computed here
and calls go out as ``EVALSHA``; a server that does not know it yet (first use, restart,
failover) answers NOSCRIPT and the caller loads it and tries again (see ``scripting.py``).

Two families:

* ``standalone_*``: one script per operation on a single node. Some of them reach keys
  they only learn while running (the lease keys listed in a session's index, the
  holder's session hash for its metadata). A single node allows that because every key
  lives in the one keyspace the script runs against; it is what makes a keep-alive of N
  leases one round trip. Redis Cluster forbids it, hence:
* ``cluster_*`` and ``session_*``: scripts that touch the keys of one hash slot only,
  declared in KEYS, for the route-by-hash slot logic of ``cluster.py``.

The others serve both topologies.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from importlib import resources

from . import keys

#: Where the ``.lua`` files are, found through the package so that an installed wheel works too.
LUA_FILES = resources.files(__package__ or __name__).joinpath("lua")
PRELUDE = "_prelude.lua"
#: The constants every script sees as Lua locals of the same name.
CONSTANTS: dict[str, str | int] = {
    "LEASE_PREFIX": keys.LEASE_PREFIX,
    "GROUP_PREFIX": keys.GROUP_PREFIX,
    "SESSION_PREFIX": keys.SESSION_PREFIX,
    "LEASE_INDEX_SUFFIX": keys.LEASE_INDEX_SUFFIX,
    "RELEASED": keys.RELEASED,
    "HANDED_OVER": keys.HANDED_OVER,
    "CHANGED": keys.CHANGED,
    "IDLE_LEASE_MS": keys.IDLE_LEASE_MS,
}
_INCLUDE = re.compile(r"^-- include: (_\w+\.lua)$", re.MULTILINE)
_PLAIN = re.compile(r"[\w:{}. -]*\Z")  # nothing a Lua string between single quotes would have to escape


@dataclass(frozen=True)
class Script:
    name: str
    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())


def read_lua(file_name: str) -> str:
    return LUA_FILES.joinpath(file_name).read_text(encoding="utf-8")


def includes(text: str) -> list[str]:
    """The fragments a script names on its ``-- include:`` lines, in order."""
    return _INCLUDE.findall(text)


def constants_header() -> str:
    lines = []
    for name, value in CONSTANTS.items():
        if isinstance(value, int):
            lines.append(f"local {name} = {value:d}\n")
        elif _PLAIN.match(value):
            lines.append(f"local {name} = '{value}'\n")
        else:
            raise ValueError(f"{name} = {value!r} cannot be written as a plain Lua string")
    return "".join(lines)


def flags_line(body: str) -> str:
    """A script's ``#!lua ...`` first line (with its newline), or ''."""
    return body[: body.index("\n") + 1] if body.startswith("#!") else ""


def load(name: str) -> Script:
    """The script ``lua/<name>.lua`` with the constants, the prelude and its fragments before it."""
    body = read_lua(f"{name}.lua")
    fragments = [read_lua(fragment) for fragment in includes(body)]
    if any(includes(fragment) for fragment in fragments):
        raise ValueError(f"{name}.lua: a fragment it includes includes another; fragments stay flat")
    flags = flags_line(body)
    parts = [flags, constants_header(), read_lua(PRELUDE), *fragments, body[len(flags) :]]
    return Script(name, "".join(parts))


# -- shared by both topologies --------------------------------------------------------------
OPEN_SESSION = load("open_session")
SESSIONS_READ = load("sessions_read")
LEASES_READ = load("leases_read")
GROUP_READ = load("group_read")
GROUP_PURGE = load("group_purge")
LEASES_IDLE = load("leases_idle")
FORCE_RELEASE = load("force_release")
MARK = load("mark")
# -- single node: one script per operation ---------------------------------------------------
STANDALONE_KEEP_ALIVE = load("standalone_keep_alive")
STANDALONE_CLOSE = load("standalone_close")
STANDALONE_ACQUIRE = load("standalone_acquire")
STANDALONE_RELEASE = load("standalone_release")
STANDALONE_JOIN = load("standalone_join")
STANDALONE_LEAVE = load("standalone_leave")
STANDALONE_LEASES_READ = load("standalone_leases_read")
STANDALONE_MEMBERS = load("standalone_members")
# -- Redis Cluster: one hash slot per script ------------------------------------------------------
SESSION_RENEW = load("session_renew")
SESSION_CLOSE = load("session_close")
SESSION_ATTEMPT = load("session_attempt")
SESSION_DROP_STALE = load("session_drop_stale")
CLUSTER_GRANT = load("cluster_grant")
CLUSTER_RELEASE = load("cluster_release")
CLUSTER_JOIN = load("cluster_join")
CLUSTER_LEAVE = load("cluster_leave")
CLUSTER_RENEW = load("cluster_renew")
CLUSTER_FREE = load("cluster_free")

ALL_SCRIPTS: tuple[Script, ...] = (
    OPEN_SESSION,
    SESSIONS_READ,
    LEASES_READ,
    GROUP_READ,
    GROUP_PURGE,
    LEASES_IDLE,
    FORCE_RELEASE,
    MARK,
    STANDALONE_KEEP_ALIVE,
    STANDALONE_CLOSE,
    STANDALONE_ACQUIRE,
    STANDALONE_RELEASE,
    STANDALONE_JOIN,
    STANDALONE_LEAVE,
    STANDALONE_LEASES_READ,
    STANDALONE_MEMBERS,
    SESSION_RENEW,
    SESSION_CLOSE,
    SESSION_ATTEMPT,
    SESSION_DROP_STALE,
    CLUSTER_GRANT,
    CLUSTER_RELEASE,
    CLUSTER_JOIN,
    CLUSTER_LEAVE,
    CLUSTER_RENEW,
    CLUSTER_FREE,
)
