-- KEYS: session, index. ARGV: entry (a lease or group name).
-- Records an acquire / join attempt. Returns {-1} expired, else {1, remaining ms, lease ms}.
local now = now_ms()
local expires = session_expiry(KEYS[1], now)
if not expires then return {-1} end
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('PEXPIREAT', KEYS[2], expires)
return {1, expires - now, tonumber(redis.call('HGET', KEYS[1], 'lease'))}
