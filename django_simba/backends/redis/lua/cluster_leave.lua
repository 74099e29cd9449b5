-- KEYS: group. ARGV: session id. Returns 1 when a membership was removed.
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('PUBLISH', KEYS[1], CHANGED)
  return 1
end
return 0
