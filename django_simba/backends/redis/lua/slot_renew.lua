-- KEYS: leases of one slot, then groups of the same slot. ARGV: session id, remaining ms, number of leases.
-- Extends each lease the session holds and each membership to at least now + remaining (never
-- shortens). Returns per key: the token (0: not held) / 1 member, 0 not a member.
local now = now_ms()
local sid = ARGV[1]
local until_ = now + tonumber(ARGV[2])
local leases = tonumber(ARGV[3])
local out = {}
for i = 1, leases do
  local fields = redis.call('HMGET', KEYS[i], 'session', 'token', 'expires')
  if held_by(fields, now) == sid then
    if until_ > tonumber(fields[3]) then redis.call('HSET', KEYS[i], 'expires', until_) end
    out[i] = tonumber(fields[2])
  else
    out[i] = 0
  end
end
for i = leases + 1, #KEYS do
  local score = tonumber(redis.call('ZSCORE', KEYS[i], sid))
  if score then
    if until_ > score then redis.call('ZADD', KEYS[i], until_, sid) end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
