-- KEYS: session, group index, group. ARGV: session id, group. Returns -1 expired, 1 joined, 0 already.
local now = now_ms()
local expires = session_expiry(KEYS[1], now)
if not expires then return -1 end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', string.format('%d', now))
local added = redis.call('ZADD', KEYS[3], expires, ARGV[1])
redis.call('ZADD', KEYS[2], now, ARGV[2])
redis.call('PEXPIREAT', KEYS[2], expires)
if added == 1 then redis.call('PUBLISH', KEYS[3], CHANGED) end
return added
