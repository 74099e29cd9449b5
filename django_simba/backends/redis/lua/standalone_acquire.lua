-- KEYS: session, lease index, lease, line, marker. ARGV: session id, name, wait (1: join the line if
-- refused), replicated (1: a WAIT follows). Returns {-1} session expired, {0} held by another,
-- {1, token, ms} already held, {2, token, ms} new term, {3, ms, began} no new term for ms more
-- (began: 1 when this call found the server's data lost; see _marker.lua).
-- include: _marker.lua
-- include: _grant.lua
local now, now_us = clock()
local sid = ARGV[1]
local expires = session_expiry(KEYS[1], now)
if not expires then return {-1} end
local fields = redis.call('HMGET', KEYS[3], 'session', 'token', 'expires')
local lease = tonumber(redis.call('HGET', KEYS[1], 'lease')) or (expires - now)
local held_back, since, began = epoch(KEYS[5], lease, now, now_us, server_run())
local holder = held_by(fields, now)
if holder and not of_epoch(fields[2], since) then holder = nil end
if holder then
  if holder ~= sid then
    if ARGV[3] == '1' then
      if not redis.call('ZSCORE', KEYS[4], sid) then
        -- its place in line: a count kept with the lease (the clock's milliseconds would tie)
        redis.call('ZADD', KEYS[4], redis.call('HINCRBY', KEYS[3], 'joined', 1), sid)
      end
      -- waiters try again within a lease: a line nobody waits in any more goes with its last one
      if redis.call('PTTL', KEYS[4]) < expires - now then redis.call('PEXPIREAT', KEYS[4], expires) end
    end
    return {0}
  end
  if ARGV[4] == '1' then
    -- rewritten as it is: a script that writes nothing leaves the WAIT after it covering only older
    -- writes of this connection, not the renewal (maybe on another connection) that set this expiry
    redis.call('HSET', KEYS[3], 'expires', fields[3])
  end
  return {1, tonumber(fields[2]), tonumber(fields[3]) - now}  -- listed in the index since its grant
end
if held_back > 0 then return {3, held_back, began} end
local token = grant(KEYS[3], KEYS[2], ARGV[2], fields, sid, expires, now, since, now_us)
redis.call('ZREM', KEYS[4], sid)
return {2, token, expires - now}
