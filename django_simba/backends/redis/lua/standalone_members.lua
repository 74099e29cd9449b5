-- KEYS: group. Returns {session id, metadata, ...} of live members whose session hash exists.
local now = now_ms()
local out = {}
for _, sid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', now), '+inf')) do
  local metadata = redis.call('HGET', session_key(sid), 'metadata')
  if metadata then
    out[#out + 1] = sid
    out[#out + 1] = metadata
  end
end
return out
