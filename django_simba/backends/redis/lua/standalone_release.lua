-- KEYS: lease, lease index, line, marker. ARGV: session id, name, token (0: any), hand over (1: yes).
-- Returns 2 when it freed the session's live term, 1 when it freed a term of the session whose
-- expiry had passed, 0 when not this session's term (force-released, taken over, freed before).
-- With hand-over, the first session of the line still alive gets a new term at once
-- (HANDED_OVER); dead ones are dropped on the way. While new terms are held back (_marker.lua) the
-- name goes free instead, and the waiter keeps its place.
-- A released name stays in the index (the next keep-alive drops it): one command less per cycle,
-- and a re-acquire finds it listed already.
-- include: _marker.lua
-- include: _grant.lua
local fields = redis.call('HMGET', KEYS[1], 'session', 'token', 'expires')
if fields[1] ~= ARGV[1] or (ARGV[3] ~= '0' and fields[2] ~= ARGV[3]) then
  -- not this session's term: drop the name from the index only when the session lost it
  if fields[1] ~= ARGV[1] then redis.call('ZREM', KEYS[2], ARGV[2]) end
  return 0
end
local now, now_us = clock()
local freed = 1
if held_by(fields, now) then freed = 2 end
if ARGV[4] == '1' and redis.call('EXISTS', KEYS[3]) == 1 then
  local run = server_run()
  while true do
    local first = redis.call('ZPOPMIN', KEYS[3])
    if #first == 0 then break end
    local sid = first[1]
    local waiter = session_key(sid)
    local expires = session_expiry(waiter, now)
    if expires then
      local lease = tonumber(redis.call('HGET', waiter, 'lease')) or (expires - now)
      local held_back, since = epoch(KEYS[4], lease, now, now_us, run)
      if held_back > 0 then
        redis.call('ZADD', KEYS[3], first[2], sid)
        break
      end
      local index = waiter .. LEASE_INDEX_SUFFIX  -- the waiter's, known only here
      local token = grant(KEYS[1], index, ARGV[2], fields, sid, expires, now, since, now_us)
      -- told on the session's own channel: the other waiters need not wake, the name is held
      local message = HANDED_OVER .. ' ' .. int(token) .. ' ' .. ARGV[2]
      redis.call('PUBLISH', waiter, message)
      return freed
    end
  end
end
free(KEYS[1])
redis.call('PUBLISH', KEYS[1], RELEASED)
return freed
