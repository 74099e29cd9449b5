-- KEYS: lease hashes. Like leases_read plus the holder's metadata (read from its session hash).
local now = now_ms()
local out = {}
for i, key in ipairs(KEYS) do
  local fields = redis.call('HMGET', key, 'session', 'token', 'expires')
  local holder = held_by(fields, now)
  if holder then
    local metadata = redis.call('HGET', session_key(holder), 'metadata')
    out[#out + 1] = {i, holder, tonumber(fields[2]), tonumber(fields[3]) - now, metadata or ''}
  end
end
return out
