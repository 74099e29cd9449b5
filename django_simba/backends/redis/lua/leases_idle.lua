-- KEYS: lease hashes (of one hash slot on a cluster). Gives every hash whose term is over and that never
-- expires (a holder that crashed, a version before idle hashes expired) the idle time of a freed one.
-- Returns how many it gave it to.
local now = now_ms()
local given = 0
for _, key in ipairs(KEYS) do
  local fields = redis.call('HMGET', key, 'session', 'token', 'expires')
  if fields[2] and not held_by(fields, now) and redis.call('PTTL', key) == -1 then
    redis.call('PEXPIRE', key, IDLE_LEASE_MS)
    given = given + 1
  end
end
return given
