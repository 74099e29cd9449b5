-- KEYS: group index, group. ARGV: session id, group. Returns 1 when a membership was removed.
redis.call('ZREM', KEYS[1], ARGV[2])
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  redis.call('PUBLISH', KEYS[2], CHANGED)
  return 1
end
return 0
