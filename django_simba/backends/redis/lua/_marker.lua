-- Fragment: the marker, a server's record that it still holds every write it made, and the epochs
-- it starts (design: "Redis that forgets"). ``epoch`` returns the milliseconds for which new terms
-- are still held back (0: none), the epoch's start in microseconds, and 1 when this call began it.
--
-- An epoch begins when the marker is missing (a new server, a restart without persistence, FLUSHALL
-- or FLUSHDB, a failover to an empty replica), or when it was left by another server process that did
-- not replay its own append-only file (a restart from an RDB snapshot, a failover to a replica: both
-- may lack the last writes). New terms then wait for the longest lease known, so that no holder of a
-- lost term still trusts it, and a name whose token is older than the epoch continues from the clock.
-- A term granted before the epoch is over (``of_epoch``). The marker is written to the AOF only,
-- never to replicas, so a promoted replica starts an epoch.
local function server_run()
  local info = redis.pcall('INFO', 'server')
  if type(info) ~= 'string' then return nil end  -- INFO refused by an ACL: only a missing marker tells
  return string.match(info, 'run_id:(%x+)')
end
local function replayed_own_aof()
  -- loaded at start from the AOF it wrote itself, and not promoted from a replica since
  local info = redis.pcall('INFO', 'persistence', 'replication')
  if type(info) ~= 'string' then return false end
  return string.match(info, 'aof_enabled:(%d)') == '1'
    and string.match(info, 'master_replid2:(%x+)') == string.rep('0', 40)
end
local function write_marker(key, ...)
  redis.set_repl(redis.REPL_AOF)
  redis.call('HSET', key, ...)
  redis.set_repl(redis.REPL_ALL)
end
local function epoch(key, lease, now, now_us, run)
  local m = redis.call('HMGET', key, 'since', 'until', 'lease', 'run')
  local since, until_, longest = tonumber(m[1]), tonumber(m[2]) or 0, tonumber(m[3]) or 0
  if since and run and m[4] ~= run then
    if replayed_own_aof() then write_marker(key, 'run', run) else since = nil end
  end
  if not since then
    longest = math.max(lease, longest)
    write_marker(key, 'since', int(now_us), 'until', int(now + longest), 'lease', int(longest), 'run', run or '')
    return longest, now_us, 1
  end
  if lease > longest then
    -- a lease longer than any before: a hold-back under way lasts that long from its start
    if until_ > now then until_ = math.max(until_, math.floor(since / 1000) + lease) end
    write_marker(key, 'lease', int(lease), 'until', int(until_))
  end
  return math.max(0, until_ - now), since, 0
end
-- A term granted before the epoch began is over (a snapshot or a replica may show it held): its
-- holder may have lost it long ago, and someone else hold the name since, in writes the server lost.
local function of_epoch(token, since) return (tonumber(token) or 0) >= since end
-- The token of a new term: one above the last, unless the last is older than the epoch (or there is
-- none, or the hash expired): then the clock's microseconds, above every token this name ever had,
-- as long as the clock never steps back and no name gets two terms within one microsecond.
local function next_token(last, since, now_us)
  local token = (tonumber(last) or 0) + 1
  if token <= since then return now_us end
  return token
end
