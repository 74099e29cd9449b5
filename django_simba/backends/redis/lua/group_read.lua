-- KEYS: group. Returns the live members' session ids.
local now = now_ms()
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', now), '+inf')
