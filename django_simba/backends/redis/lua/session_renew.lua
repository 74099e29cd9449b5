-- KEYS: session, lease index, group index, the marker of their hash slot. ARGV: lease ms.
-- Returns {live, lease ms, {name, stale, ...}, {group, stale, ...}}; stale marks entries whose last
-- attempt is older than one lease (only those may be dropped when not held). When expired, the lease ms
-- are those for which new terms are still held back in the hash slot (> 0: it lost its data within a
-- lease, and the session with it; the marker is read only then).
-- include: _index_entries.lua
-- include: _marker.lua
local now, now_us = clock()
local lease = tonumber(ARGV[1])
local leases = entries(redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES'), now - lease)
local groups = entries(redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES'), now - lease)
if not session_expiry(KEYS[1], now) then
  return {0, (epoch(KEYS[4], lease, now, now_us, server_run())), leases, groups}
end
local expires = now + lease
redis.call('HSET', KEYS[1], 'expires', expires, 'lease', lease)
for i = 1, 3 do redis.call('PEXPIREAT', KEYS[i], expires) end
return {1, lease, leases, groups}
