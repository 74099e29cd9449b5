-- KEYS: group. ARGV: session id, lease ms. A new membership lasts one full lease on this node's clock.
-- Returns 1 when the session became a member, 0 when it already was.
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
local until_ = now + tonumber(ARGV[2])
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if score then
  if until_ > score then redis.call('ZADD', KEYS[1], until_, ARGV[1]) end
  return 0
end
redis.call('ZADD', KEYS[1], until_, ARGV[1])
redis.call('PUBLISH', KEYS[1], CHANGED)
return 1
