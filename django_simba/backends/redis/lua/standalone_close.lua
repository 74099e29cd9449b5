-- KEYS: session, lease index, group index. ARGV: session id.
-- Deletes the session first, then frees its leases and memberships, then drops the indexes.
-- include: _free_session.lua
redis.call('DEL', KEYS[1])
free_session(ARGV[1], KEYS[2], KEYS[3], nil)  -- the holder gives them up: all of them
return 1
