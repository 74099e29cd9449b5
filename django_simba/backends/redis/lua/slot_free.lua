-- KEYS: leases of one slot, then groups of the same slot. ARGV: session id, number of leases.
-- Frees the session's leases (publishing each) and removes its memberships.
local sid = ARGV[1]
local leases = tonumber(ARGV[2])
for i = 1, leases do
  if redis.call('HGET', KEYS[i], 'session') == sid then
    redis.call('HSET', KEYS[i], 'session', '')
    redis.call('PUBLISH', KEYS[i], RELEASED)
  end
end
for i = leases + 1, #KEYS do
  if redis.call('ZREM', KEYS[i], sid) == 1 then redis.call('PUBLISH', KEYS[i], CHANGED) end
end
return 1
