-- KEYS: session, lease index, group index. ARGV: session id, lease ms.
-- Returns {0} when expired (after freeing what was left, except leases still live: they expire on
-- their own), else {1, lease ms, name, token, ...}.
-- include: _free_session.lua
local now = now_ms()
local sid = ARGV[1]
if not session_expiry(KEYS[1], now) then
  redis.call('DEL', KEYS[1])
  free_session(sid, KEYS[2], KEYS[3], now)
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
