-- KEYS: session. ARGV: lease ms, metadata. Returns the lease in ms.
local now = now_ms()
local lease = tonumber(ARGV[1])
local expires = now + lease
redis.call('HSET', KEYS[1], 'metadata', ARGV[2], 'expires', expires, 'lease', lease)
redis.call('PEXPIREAT', KEYS[1], expires)
return lease
