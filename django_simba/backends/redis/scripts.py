"""The Lua scripts: every decision about time is taken inside Redis with ``TIME``.

Each script is registered once: its SHA1 is computed here and calls go out as
``EVALSHA``; a server that does not know it yet (first use, restart, failover)
answers NOSCRIPT and the caller loads it and tries again (see ``scripting.py``).

Times are integer milliseconds of the Redis clock of the node running the script.
A lease is held when its ``session`` field is not empty and its ``expires`` is in
the future; a session is live while its hash exists with ``expires`` in the future.

Two families:

* ``STANDALONE_*``: one script per operation on a single node. Some of them reach
  keys they only learn while running (the lease keys listed in a session's index,
  the holder's session hash for its metadata). A single node allows that because
  every key lives in the one keyspace the script runs against; it is what makes a
  keep-alive of N leases one round trip. Redis Cluster forbids it, hence:
* ``SLOT_*`` and ``SESSION_*``: scripts that touch the keys of one hash slot only,
  declared in KEYS, for the route-by-slot logic of ``cluster.py``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from .keys import (
    CHANGED,
    GROUP_PREFIX,
    HANDED_OVER,
    LEASE_INDEX_SUFFIX,
    LEASE_PREFIX,
    RELEASED,
    SESSION_PREFIX,
)


@dataclass(frozen=True)
class Script:
    name: str
    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())


_PRELUDE = f"""
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function lease_key(name) return '{LEASE_PREFIX}' .. name .. '}}' end
local function group_key(name) return '{GROUP_PREFIX}' .. name .. '}}' end
local function session_key(sid) return '{SESSION_PREFIX}' .. sid .. '}}' end
local function session_expiry(key, now)
  local expires = tonumber(redis.call('HGET', key, 'expires'))
  if expires and expires > now then return expires end
  return nil
end
local function held_by(fields, now)
  if fields[1] and fields[1] ~= '' and (tonumber(fields[3]) or 0) > now then return fields[1] end
  return nil
end
"""


def _script(name: str, body: str) -> Script:
    return Script(name, _PRELUDE + body)


# -- shared by both topologies --------------------------------------------------------------

#: KEYS: session. ARGV: lease ms, metadata. Returns the lease in ms.
OPEN_SESSION = _script(
    "open_session",
    """
local now = now_ms()
local lease = tonumber(ARGV[1])
local expires = now + lease
redis.call('HSET', KEYS[1], 'metadata', ARGV[2], 'expires', expires, 'lease', lease)
redis.call('PEXPIREAT', KEYS[1], expires)
return lease
""",
)

#: KEYS: session hashes. Returns {index, metadata, remaining ms} for each that exists.
SESSIONS_READ = _script(
    "sessions_read",
    """
local now = now_ms()
local out = {}
for i, key in ipairs(KEYS) do
  local fields = redis.call('HMGET', key, 'metadata', 'expires')
  if fields[2] then
    out[#out + 1] = {i, fields[1] or '', tonumber(fields[2]) - now}
  end
end
return out
""",
)

#: KEYS: lease hashes. Returns {index, session, token, remaining ms} for each live one.
LEASES_READ = _script(
    "leases_read",
    """
local now = now_ms()
local out = {}
for i, key in ipairs(KEYS) do
  local fields = redis.call('HMGET', key, 'session', 'token', 'expires')
  local holder = held_by(fields, now)
  if holder then
    out[#out + 1] = {i, holder, tonumber(fields[2]), tonumber(fields[3]) - now}
  end
end
return out
""",
)

#: KEYS: group. Returns the live members' session ids.
GROUP_READ = _script(
    "group_read",
    """
local now = now_ms()
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', now), '+inf')
""",
)

#: KEYS: group. ARGV: limit. Removes up to ``limit`` expired members; returns their ids.
GROUP_PURGE = _script(
    "group_purge",
    """
local now = now_ms()
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now),
  'LIMIT', 0, tonumber(ARGV[1]))
if #gone > 0 then redis.call('ZREM', KEYS[1], unpack(gone)) end
return gone
""",
)

#: KEYS: lease. Frees it whoever holds it; returns 1 when a live holder lost it.
FORCE_RELEASE = _script(
    "force_release",
    f"""
local now = now_ms()
local fields = redis.call('HMGET', KEYS[1], 'session', 'expires')
if not fields[1] or fields[1] == '' then return 0 end
redis.call('HSET', KEYS[1], 'session', '')
redis.call('PUBLISH', KEYS[1], '{RELEASED}')
if (tonumber(fields[2]) or 0) > now then return 1 end
return 0
""",
)

# -- single node: one script per operation ---------------------------------------------------

_FREE_SESSION = f"""
local function free_session(sid, leases_key, groups_key)
  for _, name in ipairs(redis.call('ZRANGE', leases_key, 0, -1)) do
    local key = lease_key(name)
    if redis.call('HGET', key, 'session') == sid then
      redis.call('HSET', key, 'session', '')
      redis.call('PUBLISH', key, '{RELEASED}')
    end
  end
  for _, group in ipairs(redis.call('ZRANGE', groups_key, 0, -1)) do
    local key = group_key(group)
    if redis.call('ZREM', key, sid) == 1 then redis.call('PUBLISH', key, '{CHANGED}') end
  end
  redis.call('DEL', leases_key, groups_key)
end
"""

#: KEYS: session, lease index, group index. ARGV: session id, lease ms.
#: Returns {0} when expired (after freeing what was left), else {1, lease ms, name, token, ...}.
STANDALONE_KEEP_ALIVE = _script(
    "standalone_keep_alive",
    _FREE_SESSION
    + """
local now = now_ms()
local sid = ARGV[1]
if not session_expiry(KEYS[1], now) then
  redis.call('DEL', KEYS[1])
  free_session(sid, KEYS[2], KEYS[3])
  return {0}
end
local lease = tonumber(ARGV[2])
local expires = now + lease
redis.call('HSET', KEYS[1], 'expires', expires, 'lease', lease)
redis.call('PEXPIREAT', KEYS[1], expires)
local out = {1, lease}
for _, name in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local key = lease_key(name)
  local fields = redis.call('HMGET', key, 'session', 'token', 'expires')
  if held_by(fields, now) == sid then
    redis.call('HSET', key, 'expires', expires)
    out[#out + 1] = name
    out[#out + 1] = tonumber(fields[2])
  else
    -- lost (taken over or force-released); acquire is atomic here, so nothing is in flight
    redis.call('ZREM', KEYS[2], name)
  end
end
for _, group in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  local key = group_key(group)
  if redis.call('ZSCORE', key, sid) then
    redis.call('ZADD', key, expires, sid)
  else
    redis.call('ZREM', KEYS[3], group)
  end
end
redis.call('PEXPIREAT', KEYS[2], expires)
redis.call('PEXPIREAT', KEYS[3], expires)
return out
""",
)

#: KEYS: session, lease index, group index. ARGV: session id.
#: Deletes the session first, then frees its leases and memberships, then drops the indexes.
STANDALONE_CLOSE = _script(
    "standalone_close",
    _FREE_SESSION
    + """
redis.call('DEL', KEYS[1])
free_session(ARGV[1], KEYS[2], KEYS[3])
return 1
""",
)

_GRANT = """
-- A new term of the lease ``name`` for the live session ``sid``: it lasts as long as the session,
-- whose lease ``index`` lists it, so that its keep-alives renew it.
local function grant(lease, index, name, fields, sid, expires, now)
  -- a name already listed means the index exists, with the session's expiry set by its creator
  if redis.call('ZADD', index, now, name) == 1 then redis.call('PEXPIREAT', index, expires) end
  local token = (tonumber(fields[2]) or 0) + 1  -- one write for the whole new term
  redis.call('HSET', lease, 'session', sid, 'token', string.format('%d', token), 'expires', expires)
  return token
end
"""

#: KEYS: session, lease index, lease, line. ARGV: session id, name, wait (1: join the line if refused).
#: Returns {-1} session expired, {0} held by another, {1, token, ms} already held, {2, token, ms} new term.
STANDALONE_ACQUIRE = _script(
    "standalone_acquire",
    _GRANT
    + """
local now = now_ms()
local sid = ARGV[1]
local expires = session_expiry(KEYS[1], now)
if not expires then return {-1} end
local fields = redis.call('HMGET', KEYS[3], 'session', 'token', 'expires')
local holder = held_by(fields, now)
if holder then
  if holder ~= sid then
    if ARGV[3] == '1' then
      if not redis.call('ZSCORE', KEYS[4], sid) then
        -- its place in line: a count kept with the lease (the clock's milliseconds would tie)
        redis.call('ZADD', KEYS[4], redis.call('HINCRBY', KEYS[3], 'joined', 1), sid)
      end
      -- waiters try again within a lease: a line nobody waits in any more goes with its last one
      if redis.call('PTTL', KEYS[4]) < expires - now then redis.call('PEXPIREAT', KEYS[4], expires) end
    end
    return {0}
  end
  return {1, tonumber(fields[2]), tonumber(fields[3]) - now}  -- listed in the index since its grant
end
local token = grant(KEYS[3], KEYS[2], ARGV[2], fields, sid, expires, now)
redis.call('ZREM', KEYS[4], sid)
return {2, token, expires - now}
""",
)

#: KEYS: lease, lease index, line. ARGV: session id, name, token (0: any), hand over (1: yes).
#: Returns 1 when released, 0 when not this session's term. With hand-over, the first session of
#: the line still alive gets a new term at once (HANDED_OVER); dead ones are dropped on the way.
#: A released name stays in the index (the next keep-alive drops it): one command less per cycle,
#: and a re-acquire finds it listed already.
STANDALONE_RELEASE = _script(
    "standalone_release",
    _GRANT
    + f"""
local fields = redis.call('HMGET', KEYS[1], 'session', 'token')
if fields[1] ~= ARGV[1] or (ARGV[3] ~= '0' and fields[2] ~= ARGV[3]) then
  -- not this session's term: drop the name from the index only when the session lost it
  if fields[1] ~= ARGV[1] then redis.call('ZREM', KEYS[2], ARGV[2]) end
  return 0
end
if ARGV[4] == '1' and redis.call('EXISTS', KEYS[3]) == 1 then
  local now = now_ms()
  while true do
    local first = redis.call('ZPOPMIN', KEYS[3])
    if #first == 0 then break end
    local sid = first[1]
    local expires = session_expiry(session_key(sid), now)
    if expires then
      local index = session_key(sid) .. '{LEASE_INDEX_SUFFIX}'  -- the waiter's, known only here
      local token = grant(KEYS[1], index, ARGV[2], fields, sid, expires, now)
      -- told on the session's own channel: the other waiters need not wake, the name is held
      local message = '{HANDED_OVER} ' .. string.format('%d', token) .. ' ' .. ARGV[2]
      redis.call('PUBLISH', session_key(sid), message)
      return 1
    end
  end
end
redis.call('HSET', KEYS[1], 'session', '')
redis.call('PUBLISH', KEYS[1], '{RELEASED}')
return 1
""",
)

#: KEYS: session, group index, group. ARGV: session id, group. Returns -1 expired, 1 joined, 0 already.
STANDALONE_JOIN = _script(
    "standalone_join",
    f"""
local now = now_ms()
local expires = session_expiry(KEYS[1], now)
if not expires then return -1 end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', string.format('%d', now))
local added = redis.call('ZADD', KEYS[3], expires, ARGV[1])
redis.call('ZADD', KEYS[2], now, ARGV[2])
redis.call('PEXPIREAT', KEYS[2], expires)
if added == 1 then redis.call('PUBLISH', KEYS[3], '{CHANGED}') end
return added
""",
)

#: KEYS: group index, group. ARGV: session id, group. Returns 1 when a membership was removed.
STANDALONE_LEAVE = _script(
    "standalone_leave",
    f"""
redis.call('ZREM', KEYS[1], ARGV[2])
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  redis.call('PUBLISH', KEYS[2], '{CHANGED}')
  return 1
end
return 0
""",
)

#: KEYS: lease hashes. Like LEASES_READ plus the holder's metadata (read from its session hash).
STANDALONE_LEASES_READ = _script(
    "standalone_leases_read",
    """
local now = now_ms()
local out = {}
for i, key in ipairs(KEYS) do
  local fields = redis.call('HMGET', key, 'session', 'token', 'expires')
  local holder = held_by(fields, now)
  if holder then
    local metadata = redis.call('HGET', session_key(holder), 'metadata')
    out[#out + 1] = {i, holder, tonumber(fields[2]), tonumber(fields[3]) - now, metadata or ''}
  end
end
return out
""",
)

#: KEYS: group. Returns {session id, metadata, ...} of live members whose session hash exists.
STANDALONE_MEMBERS = _script(
    "standalone_members",
    """
local now = now_ms()
local out = {}
for _, sid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', now), '+inf')) do
  local metadata = redis.call('HGET', session_key(sid), 'metadata')
  if metadata then
    out[#out + 1] = sid
    out[#out + 1] = metadata
  end
end
return out
""",
)

# -- Redis Cluster: one slot per script ------------------------------------------------------

_INDEX_ENTRIES = """
local function entries(list, horizon)
  local out = {}
  for i = 1, #list, 2 do
    out[#out + 1] = list[i]
    if tonumber(list[i + 1]) < horizon then out[#out + 1] = 1 else out[#out + 1] = 0 end
  end
  return out
end
"""

#: KEYS: session, lease index, group index. ARGV: lease ms.
#: Returns {live, lease ms, {name, stale, ...}, {group, stale, ...}}; stale marks entries whose last
#: attempt is older than one lease (only those may be dropped when not held).
SESSION_RENEW = _script(
    "session_renew",
    _INDEX_ENTRIES
    + """
local now = now_ms()
local lease = tonumber(ARGV[1])
local leases = entries(redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES'), now - lease)
local groups = entries(redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES'), now - lease)
if not session_expiry(KEYS[1], now) then return {0, 0, leases, groups} end
local expires = now + lease
redis.call('HSET', KEYS[1], 'expires', expires, 'lease', lease)
for _, key in ipairs(KEYS) do redis.call('PEXPIREAT', key, expires) end
return {1, lease, leases, groups}
""",
)

#: KEYS: session, lease index, group index. Deletes the session; returns {names, groups} of its indexes.
SESSION_CLOSE = _script(
    "session_close",
    """
redis.call('DEL', KEYS[1])
return {redis.call('ZRANGE', KEYS[2], 0, -1), redis.call('ZRANGE', KEYS[3], 0, -1)}
""",
)

#: KEYS: session, index. ARGV: entry (a lease or group name).
#: Records an acquire / join attempt. Returns {-1} expired, else {1, remaining ms, lease ms}.
SESSION_ATTEMPT = _script(
    "session_attempt",
    """
local now = now_ms()
local expires = session_expiry(KEYS[1], now)
if not expires then return {-1} end
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('PEXPIREAT', KEYS[2], expires)
return {1, expires - now, tonumber(redis.call('HGET', KEYS[1], 'lease'))}
""",
)

#: KEYS: lease index, group index. ARGV: lease ms, number of names, names..., groups...
#: Drops the given entries whose last attempt is older than one lease.
SESSION_DROP_STALE = _script(
    "session_drop_stale",
    """
local horizon = now_ms() - tonumber(ARGV[1])
local leases = tonumber(ARGV[2])
for i = 3, #ARGV do
  local key = KEYS[2]
  if i - 2 <= leases then key = KEYS[1] end
  local score = tonumber(redis.call('ZSCORE', key, ARGV[i]))
  if score and score < horizon then redis.call('ZREM', key, ARGV[i]) end
end
return 1
""",
)

#: KEYS: lease. ARGV: session id, lease ms. A new term lasts one full lease on this node's clock.
#: Returns {0} held by another, {1, token, ms} already held, {2, token, ms} new term.
SLOT_GRANT = _script(
    "slot_grant",
    """
local now = now_ms()
local fields = redis.call('HMGET', KEYS[1], 'session', 'token', 'expires')
local holder = held_by(fields, now)
if holder and holder ~= ARGV[1] then return {0} end
if holder then return {1, tonumber(fields[2]), tonumber(fields[3]) - now} end
local lease = tonumber(ARGV[2])
local token = (tonumber(fields[2]) or 0) + 1
redis.call('HSET', KEYS[1], 'session', ARGV[1], 'token', string.format('%d', token), 'expires', now + lease)
return {2, token, lease}
""",
)

#: KEYS: lease. ARGV: session id, token (0: any term of the session). Returns 1 when released.
SLOT_RELEASE = _script(
    "slot_release",
    f"""
local fields = redis.call('HMGET', KEYS[1], 'session', 'token')
if fields[1] ~= ARGV[1] or (ARGV[2] ~= '0' and fields[2] ~= ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'session', '')
redis.call('PUBLISH', KEYS[1], '{RELEASED}')
return 1
""",
)

#: KEYS: group. ARGV: session id, lease ms. A new membership lasts one full lease on this node's clock.
#: Returns 1 when the session became a member, 0 when it already was.
SLOT_JOIN = _script(
    "slot_join",
    f"""
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
local until_ = now + tonumber(ARGV[2])
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if score then
  if until_ > score then redis.call('ZADD', KEYS[1], until_, ARGV[1]) end
  return 0
end
redis.call('ZADD', KEYS[1], until_, ARGV[1])
redis.call('PUBLISH', KEYS[1], '{CHANGED}')
return 1
""",
)

#: KEYS: group. ARGV: session id. Returns 1 when a membership was removed.
SLOT_LEAVE = _script(
    "slot_leave",
    f"""
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('PUBLISH', KEYS[1], '{CHANGED}')
  return 1
end
return 0
""",
)

#: KEYS: leases of one slot, then groups of the same slot. ARGV: session id, remaining ms, number of leases.
#: Extends each lease the session holds and each membership to at least now + remaining (never
#: shortens). Returns per key: the token (0: not held) / 1 member, 0 not a member.
SLOT_RENEW = _script(
    "slot_renew",
    """
local now = now_ms()
local sid = ARGV[1]
local until_ = now + tonumber(ARGV[2])
local leases = tonumber(ARGV[3])
local out = {}
for i = 1, leases do
  local fields = redis.call('HMGET', KEYS[i], 'session', 'token', 'expires')
  if held_by(fields, now) == sid then
    if until_ > tonumber(fields[3]) then redis.call('HSET', KEYS[i], 'expires', until_) end
    out[i] = tonumber(fields[2])
  else
    out[i] = 0
  end
end
for i = leases + 1, #KEYS do
  local score = tonumber(redis.call('ZSCORE', KEYS[i], sid))
  if score then
    if until_ > score then redis.call('ZADD', KEYS[i], until_, sid) end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
""",
)

#: KEYS: leases of one slot, then groups of the same slot. ARGV: session id, number of leases.
#: Frees the session's leases (publishing each) and removes its memberships.
SLOT_FREE = _script(
    "slot_free",
    f"""
local sid = ARGV[1]
local leases = tonumber(ARGV[2])
for i = 1, leases do
  if redis.call('HGET', KEYS[i], 'session') == sid then
    redis.call('HSET', KEYS[i], 'session', '')
    redis.call('PUBLISH', KEYS[i], '{RELEASED}')
  end
end
for i = leases + 1, #KEYS do
  if redis.call('ZREM', KEYS[i], sid) == 1 then redis.call('PUBLISH', KEYS[i], '{CHANGED}') end
end
return 1
""",
)

ALL_SCRIPTS: tuple[Script, ...] = (
    OPEN_SESSION,
    SESSIONS_READ,
    LEASES_READ,
    GROUP_READ,
    GROUP_PURGE,
    FORCE_RELEASE,
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
    SLOT_GRANT,
    SLOT_RELEASE,
    SLOT_JOIN,
    SLOT_LEAVE,
    SLOT_RENEW,
    SLOT_FREE,
)
