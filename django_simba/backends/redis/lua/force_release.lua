-- KEYS: lease. Frees it whoever holds it; returns 1 when a live holder lost it.
local now = now_ms()
local fields = redis.call('HMGET', KEYS[1], 'session', 'expires')
if not fields[1] or fields[1] == '' then return 0 end
free(KEYS[1])
redis.call('PUBLISH', KEYS[1], RELEASED)
if (tonumber(fields[2]) or 0) > now then return 1 end
return 0
