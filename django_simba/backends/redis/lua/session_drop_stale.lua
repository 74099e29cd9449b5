-- KEYS: lease index, group index. ARGV: lease ms, number of names, names..., groups...
-- Drops the given entries whose last attempt is older than one lease.
local horizon = now_ms() - tonumber(ARGV[1])
local leases = tonumber(ARGV[2])
for i = 3, #ARGV do
  local key = KEYS[2]
  if i - 2 <= leases then key = KEYS[1] end
  local score = tonumber(redis.call('ZSCORE', key, ARGV[i]))
  if score and score < horizon then redis.call('ZREM', key, ARGV[i]) end
end
return 1
