-- ADD_GROUP: register group ARGV[1] of the job in the hash KEYS[3] (group -> the job's produced count when
-- it joined), creating its consumer group at the stream's end: it sees only entries added after it
-- joined, and each of those is released only once every group registered at its put is done with it.
-- A consumer group of that name the stream already has (one made by a get or put on a missing stream)
-- is kept, and has seen the stream from its start: its base is 0. A group removed before (REMOVE_GROUP's
-- mark in KEYS[2]) joins anew. Returns 1 if registered now, 0 if it was already.
-- ARGV: group.

local wrong = wrong_type('stream', 'hash', 'hash')
if wrong then return wrong end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 0 end
local base = 0
if group_info(ARGV[1]) == nil then
  redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '$', 'MKSTREAM')
  base = tonumber(redis.call('HGET', KEYS[2], 'produced')) or 0
end
redis.call('HSET', KEYS[3], ARGV[1], base)
redis.call('HDEL', KEYS[2], 'removed:' .. ARGV[1])
return 1
