-- KEYS: session, lease index, group index. Deletes the session; returns {names, groups} of its indexes.
redis.call('DEL', KEYS[1])
return {redis.call('ZRANGE', KEYS[2], 0, -1), redis.call('ZRANGE', KEYS[3], 0, -1)}
