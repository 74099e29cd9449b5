-- KEYS: leases of one hash slot, then groups of the same hash slot, then the hash slot's marker. ARGV: session id,
-- remaining ms, the session's lease ms, number of leases. Extends each lease the session holds
-- (granted in the hash slot's epoch, see _marker.lua) and each membership to at least now + remaining
-- (never shortens). Returns per key: the token (0: not held) / 1 member, 0 not a member; and for the
-- marker, the ms for which new terms are still held back in the hash slot (> 0: it lost its data within
-- a lease, and the terms listed with it with it).
-- include: _marker.lua
local now, now_us = clock()
local sid = ARGV[1]
local until_ = now + tonumber(ARGV[2])
local leases = tonumber(ARGV[4])
local marker = KEYS[#KEYS]
local held_back, since = 0, 0
if leases > 0 then
  held_back, since = epoch(marker, tonumber(ARGV[3]), now, now_us, server_run())
end
local out = {}
for i = 1, leases do
  local fields = redis.call('HMGET', KEYS[i], 'session', 'token', 'expires')
  if held_by(fields, now) == sid and of_epoch(fields[2], since) then
    if until_ > tonumber(fields[3]) then redis.call('HSET', KEYS[i], 'expires', until_) end
    out[i] = tonumber(fields[2])
  else
    out[i] = 0
  end
end
for i = leases + 1, #KEYS - 1 do
  local score = tonumber(redis.call('ZSCORE', KEYS[i], sid))
  if score then
    if until_ > score then redis.call('ZADD', KEYS[i], until_, sid) end
    out[i] = 1
  else
    out[i] = 0
  end
end
out[#KEYS] = held_back
return out
