-- KEYS: session, lease index, group index, marker. ARGV: session id, lease ms.
-- Returns {0, held back ms} when expired (after freeing what was left, except leases still live: they
-- expire on their own), else {1, lease ms, held back ms, name, token, ...}. A term granted before the
-- epoch (_marker.lua) is not renewed: it is over. Held back ms > 0 says the server lost its data within
-- a lease (an epoch is under way): the session, or its terms, went with it. The marker is read only
-- then, or when the session holds leases.
-- include: _free_session.lua
-- include: _marker.lua
local now, now_us = clock()
local sid = ARGV[1]
if not session_expiry(KEYS[1], now) then
  redis.call('DEL', KEYS[1])
  free_session(sid, KEYS[2], KEYS[3], now)
  return {0, (epoch(KEYS[4], tonumber(ARGV[2]), now, now_us, server_run()))}
end
local lease = tonumber(ARGV[2])
local expires = now + lease
redis.call('HSET', KEYS[1], 'expires', expires, 'lease', lease)
redis.call('PEXPIREAT', KEYS[1], expires)
local names = redis.call('ZRANGE', KEYS[2], 0, -1)
local held_back, since = 0, 0
if #names > 0 then
  held_back, since = epoch(KEYS[4], lease, now, now_us, server_run())
end
local out = {1, lease, held_back}
for _, name in ipairs(names) do
  local key = lease_key(name)
  local fields = redis.call('HMGET', key, 'session', 'token', 'expires')
  if held_by(fields, now) == sid and of_epoch(fields[2], since) then
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
