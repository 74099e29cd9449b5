-- KEYS: lease, lease index, line. ARGV: session id, name, token (0: any), hand over (1: yes).
-- Returns 2 when it freed the session's live term, 1 when it freed a term of the session whose
-- expiry had passed, 0 when not this session's term (force-released, taken over, freed before).
-- With hand-over, the first session of the line still alive gets a new term at once
-- (HANDED_OVER); dead ones are dropped on the way.
-- A released name stays in the index (the next keep-alive drops it): one command less per cycle,
-- and a re-acquire finds it listed already.
-- include: _grant.lua
local fields = redis.call('HMGET', KEYS[1], 'session', 'token', 'expires')
if fields[1] ~= ARGV[1] or (ARGV[3] ~= '0' and fields[2] ~= ARGV[3]) then
  -- not this session's term: drop the name from the index only when the session lost it
  if fields[1] ~= ARGV[1] then redis.call('ZREM', KEYS[2], ARGV[2]) end
  return 0
end
local now = now_ms()
local freed = 1
if held_by(fields, now) then freed = 2 end
if ARGV[4] == '1' and redis.call('EXISTS', KEYS[3]) == 1 then
  while true do
    local first = redis.call('ZPOPMIN', KEYS[3])
    if #first == 0 then break end
    local sid = first[1]
    local expires = session_expiry(session_key(sid), now)
    if expires then
      local index = session_key(sid) .. LEASE_INDEX_SUFFIX  -- the waiter's, known only here
      local token = grant(KEYS[1], index, ARGV[2], fields, sid, expires, now)
      -- told on the session's own channel: the other waiters need not wake, the name is held
      local message = HANDED_OVER .. ' ' .. string.format('%d', token) .. ' ' .. ARGV[2]
      redis.call('PUBLISH', session_key(sid), message)
      return freed
    end
  end
end
redis.call('HSET', KEYS[1], 'session', '')
redis.call('PUBLISH', KEYS[1], RELEASED)
return freed
