-- Fragment: frees the leases and memberships of a session listed in its two indexes, then drops them.
-- With ``now``, a lease is freed only once its own expiry has passed: the session hash may have
-- vanished early (evicted), and the holder may trust a live lease until that expiry.
local function free_session(sid, leases_key, groups_key, now)
  for _, name in ipairs(redis.call('ZRANGE', leases_key, 0, -1)) do
    local key = lease_key(name)
    local fields = redis.call('HMGET', key, 'session', 'expires')
    if fields[1] == sid and (not now or (tonumber(fields[2]) or 0) <= now) then
      free(key)
      redis.call('PUBLISH', key, RELEASED)
    end
  end
  for _, group in ipairs(redis.call('ZRANGE', groups_key, 0, -1)) do
    local key = group_key(group)
    if redis.call('ZREM', key, sid) == 1 then redis.call('PUBLISH', key, CHANGED) end
  end
  redis.call('DEL', leases_key, groups_key)
end
