-- Fragment: a new term of the lease ``name`` for the live session ``sid``: it lasts as long as the session,
-- whose lease ``index`` lists it, so that its keep-alives renew it.
local function grant(lease, index, name, fields, sid, expires, now)
  -- a name already listed means the index exists, with the session's expiry set by its creator
  if redis.call('ZADD', index, now, name) == 1 then redis.call('PEXPIREAT', index, expires) end
  local token = (tonumber(fields[2]) or 0) + 1  -- one write for the whole new term
  redis.call('HSET', lease, 'session', sid, 'token', string.format('%d', token), 'expires', expires)
  return token
end
