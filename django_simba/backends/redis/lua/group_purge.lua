-- KEYS: group. ARGV: limit. Removes up to ``limit`` expired members; returns their ids.
local now = now_ms()
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now),
  'LIMIT', 0, tonumber(ARGV[1]))
if #gone > 0 then redis.call('ZREM', KEYS[1], unpack(gone)) end
return gone
