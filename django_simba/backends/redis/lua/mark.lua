#!lua flags=allow-cross-slot-keys
-- KEYS: a marker. ARGV: lease ms, then more markers (on a cluster: those of the other hash slots this node
-- serves; Redis routes a call by its KEYS, which must share one hash slot, and the flag lets the script
-- reach the other hash slots of the node). Begins an epoch (_marker.lua) with a hold-back of that lease
-- for each marker missing or left by another server process; returns how many it began. On a
-- cluster it runs on every primary once a grant found the data of a hash slot lost, so that every hash slot of
-- a node that lost its data holds back from the same moment and none pays again at its first use.
-- With lease 0 (a test fixture's fresh server) nothing is held back.
-- include: _marker.lua
local now, now_us = clock()
local run = server_run()
local lease = tonumber(ARGV[1])
local _, _, began = epoch(KEYS[1], lease, now, now_us, run)
for i = 2, #ARGV do
  local _, _, new = epoch(ARGV[i], lease, now, now_us, run)
  began = began + new
end
return began
