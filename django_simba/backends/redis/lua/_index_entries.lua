-- Fragment: a session index read WITHSCORES ({entry, score, ...}; scored by the time of the last
-- attempt) as {entry, stale, ...}, stale (1) when that attempt is older than ``horizon``.
local function entries(list, horizon)
  local out = {}
  for i = 1, #list, 2 do
    out[#out + 1] = list[i]
    if tonumber(list[i + 1]) < horizon then out[#out + 1] = 1 else out[#out + 1] = 0 end
  end
  return out
end
