-- KEYS: lease hashes. Returns {index, session, token, remaining ms} for each live one.
local now = now_ms()
local out = {}
for i, key in ipairs(KEYS) do
  local fields = redis.call('HMGET', key, 'session', 'token', 'expires')
  local holder = held_by(fields, now)
  if holder then
    out[#out + 1] = {i, holder, tonumber(fields[2]), tonumber(fields[3]) - now}
  end
end
return out
