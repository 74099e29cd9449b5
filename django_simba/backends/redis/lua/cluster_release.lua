-- KEYS: lease. ARGV: session id, token (0: any term of the session).
-- Returns 2 when it freed the session's live term, 1 when it freed a term of the session whose
-- expiry (on this node's clock) had passed, 0 when not this session's term.
local fields = redis.call('HMGET', KEYS[1], 'session', 'token', 'expires')
if fields[1] ~= ARGV[1] or (ARGV[2] ~= '0' and fields[2] ~= ARGV[2]) then return 0 end
local freed = 1
if held_by(fields, now_ms()) then freed = 2 end
free(KEYS[1])
redis.call('PUBLISH', KEYS[1], RELEASED)
return freed
