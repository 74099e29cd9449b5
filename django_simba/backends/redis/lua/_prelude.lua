-- Included first in every script, after the constants the loader writes from keys.py
-- (LEASE_PREFIX, GROUP_PREFIX, SESSION_PREFIX, LEASE_INDEX_SUFFIX, RELEASED, HANDED_OVER, CHANGED,
-- IDLE_LEASE_MS). Times are integer milliseconds of this node's clock (TIME).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- The same instant in milliseconds and in microseconds (new terms take their tokens from the latter).
local function clock()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end
local function int(n) return string.format('%d', n) end
local function lease_key(name) return LEASE_PREFIX .. name .. '}' end
local function group_key(name) return GROUP_PREFIX .. name .. '}' end
local function session_key(sid) return SESSION_PREFIX .. sid .. '}' end
local function session_expiry(key, now)
  local expires = tonumber(redis.call('HGET', key, 'expires'))
  if expires and expires > now then return expires end
  return nil
end
-- A lease hash whose term is over expires after IDLE_LEASE_MS unless a new term begins: an idle name
-- then costs nothing, and its next token comes from the clock (_marker.lua), above every earlier one.
local function free(key)
  redis.call('HSET', key, 'session', '')
  redis.call('PEXPIRE', key, IDLE_LEASE_MS)
end
local function held_by(fields, now)
  if fields[1] and fields[1] ~= '' and (tonumber(fields[3]) or 0) > now then return fields[1] end
  return nil
end
