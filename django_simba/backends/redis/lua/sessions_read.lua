-- KEYS: session hashes. Returns {index, metadata, remaining ms} for each that exists.
local now = now_ms()
local out = {}
for i, key in ipairs(KEYS) do
  local fields = redis.call('HMGET', key, 'metadata', 'expires')
  if fields[2] then
    out[#out + 1] = {i, fields[1] or '', tonumber(fields[2]) - now}
  end
end
return out
