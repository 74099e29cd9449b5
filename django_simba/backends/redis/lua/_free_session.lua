-- Fragment: frees the leases and memberships of a session listed in its two indexes, then drops them.
local function free_session(sid, leases_key, groups_key)
  for _, name in ipairs(redis.call('ZRANGE', leases_key, 0, -1)) do
    local key = lease_key(name)
    if redis.call('HGET', key, 'session') == sid then
      redis.call('HSET', key, 'session', '')
      redis.call('PUBLISH', key, RELEASED)
    end
  end
  for _, group in ipairs(redis.call('ZRANGE', groups_key, 0, -1)) do
    local key = group_key(group)
    if redis.call('ZREM', key, sid) == 1 then redis.call('PUBLISH', key, CHANGED) end
  end
  redis.call('DEL', leases_key, groups_key)
end
