-- KEYS: lease. ARGV: session id, token (0: any term of the session). Returns 1 when released.
local fields = redis.call('HMGET', KEYS[1], 'session', 'token')
if fields[1] ~= ARGV[1] or (ARGV[2] ~= '0' and fields[2] ~= ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'session', '')
redis.call('PUBLISH', KEYS[1], RELEASED)
return 1
