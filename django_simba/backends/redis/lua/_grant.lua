-- Fragment: a new term of the lease ``name`` for the live session ``sid``: it lasts as long as the session,
-- whose lease ``index`` lists it, so that its keep-alives renew it. Its token comes from ``next_token``
-- (_marker.lua). A held hash never expires (an eviction policy could drop it under its holder).
local function grant(lease, index, name, fields, sid, expires, now, since, now_us)
  -- a name already listed means the index exists, with the session's expiry set by its creator
  if redis.call('ZADD', index, now, name) == 1 then redis.call('PEXPIREAT', index, expires) end
  local token = next_token(fields[2], since, now_us)  -- one write for the whole new term
  redis.call('HSET', lease, 'session', sid, 'token', int(token), 'expires', expires)
  redis.call('PERSIST', lease)
  return token
end
