-- KEYS: session, lease index, group index. ARGV: lease ms.
-- Returns {live, lease ms, {name, stale, ...}, {group, stale, ...}}; stale marks entries whose last
-- attempt is older than one lease (only those may be dropped when not held).
-- include: _index_entries.lua
local now = now_ms()
local lease = tonumber(ARGV[1])
local leases = entries(redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES'), now - lease)
local groups = entries(redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES'), now - lease)
if not session_expiry(KEYS[1], now) then return {0, 0, leases, groups} end
local expires = now + lease
redis.call('HSET', KEYS[1], 'expires', expires, 'lease', lease)
for _, key in ipairs(KEYS) do redis.call('PEXPIREAT', key, expires) end
return {1, lease, leases, groups}
