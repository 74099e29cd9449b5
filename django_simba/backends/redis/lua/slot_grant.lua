-- KEYS: lease. ARGV: session id, lease ms. A new term lasts one full lease on this node's clock.
-- Returns {0} held by another, {1, token, ms} already held, {2, token, ms} new term.
local now = now_ms()
local fields = redis.call('HMGET', KEYS[1], 'session', 'token', 'expires')
local holder = held_by(fields, now)
if holder and holder ~= ARGV[1] then return {0} end
if holder then return {1, tonumber(fields[2]), tonumber(fields[3]) - now} end
local lease = tonumber(ARGV[2])
local token = (tonumber(fields[2]) or 0) + 1
redis.call('HSET', KEYS[1], 'session', ARGV[1], 'token', string.format('%d', token), 'expires', now + lease)
return {2, token, lease}
