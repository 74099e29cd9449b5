-- KEYS: lease, the marker of its hash slot. ARGV: session id, lease ms. A new term lasts one full lease on
-- this node's clock. Returns {0} held by another, {1, token, ms} already held, {2, token, ms} new term,
-- {3, ms, began} no new term for ms more (began: 1 when this call found the hash slot's data lost).
-- include: _marker.lua
local now, now_us = clock()
local fields = redis.call('HMGET', KEYS[1], 'session', 'token', 'expires')
local lease = tonumber(ARGV[2])
local held_back, since, began = epoch(KEYS[2], lease, now, now_us, server_run())
local holder = held_by(fields, now)
if holder and not of_epoch(fields[2], since) then holder = nil end
if holder and holder ~= ARGV[1] then return {0} end
if holder then return {1, tonumber(fields[2]), tonumber(fields[3]) - now} end
if held_back > 0 then return {3, held_back, began} end
local token = next_token(fields[2], since, now_us)
redis.call('HSET', KEYS[1], 'session', ARGV[1], 'token', int(token), 'expires', now + lease)
redis.call('PERSIST', KEYS[1])  -- a held hash never expires (an eviction policy could drop it)
return {2, token, lease}
