-- KEYS: leases of one hash slot, then groups of the same hash slot. ARGV: session id, expired only (1: yes),
-- number of leases. Frees the session's leases (publishing each) and removes its memberships.
-- With "expired only", a lease is freed only once its own expiry has passed: a session hash found
-- gone may have been evicted early, and the holder may trust a live lease until that expiry.
local sid = ARGV[1]
local expired_only = ARGV[2] == '1'
local leases = tonumber(ARGV[3])
local now = now_ms()
for i = 1, leases do
  local fields = redis.call('HMGET', KEYS[i], 'session', 'expires')
  if fields[1] == sid and (not expired_only or (tonumber(fields[2]) or 0) <= now) then
    free(KEYS[i])
    redis.call('PUBLISH', KEYS[i], RELEASED)
  end
end
for i = leases + 1, #KEYS do
  if redis.call('ZREM', KEYS[i], sid) == 1 then redis.call('PUBLISH', KEYS[i], CHANGED) end
end
return 1
