-- REMOVE_GROUP: group ARGV[1] is gone (its trial stopped, finished or failed): release at once every
-- entry it had not acknowledged, delivered and pending (with its copy of their bytes) or never delivered
-- to it (job_keys.lua: an entry no other live group needs is deleted with its bytes), destroy its
-- consumer group, and drop its registration (KEYS[4]) and its own counters (KEYS[2]), leaving there the
-- mark 'removed:<group>' (add_group clears it).
-- Only a registered group with another one registered beside it is removed. Anything else changes
-- nothing: a group that is not registered has no count in the entries (release would take what other
-- groups still need), and the job's last group would leave the producers filling a stream that no group
-- added later ever reads (it starts at the stream's end).
-- Returns {1, entries released} when removed; {0, 0} when it was removed before (the mark: a call sent
-- again after its answer was lost); {-1, the registered groups} when it is not registered; {-2, 0} when
-- it is the last registered group.
-- ARGV: group.

local wrong = wrong_type('stream', 'hash', 'hash', 'hash')
if wrong then return wrong end
local mark = 'removed:' .. ARGV[1]
if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 0 then
  if redis.call('HEXISTS', KEYS[2], mark) == 1 then return {0, 0} end
  return {-1, redis.call('HKEYS', KEYS[4])}
end
if redis.call('HLEN', KEYS[4]) == 1 then return {-2, 0} end
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('HDEL', KEYS[2], 'acknowledged' .. SUFFIX, 'redelivered' .. SUFFIX, 'dead_lettered' .. SUFFIX,
  'malformed' .. SUFFIX)
redis.call('HSET', KEYS[2], mark, 1)
local info = group_info(ARGV[1])
if info == nil then return {1, 0} end
local released, start = 0, '-'
while true do
  local page = redis.call('XPENDING', KEYS[1], ARGV[1], start, '+', 100)
  for _, p in ipairs(page) do
    local mine = p[1] .. SUFFIX
    local copy = redis.call('HGET', KEYS[3], mine)
    if copy then redis.call('HDEL', KEYS[3], mine) end
    released = released + release(p[1], copy)
  end
  if #page < 100 then break end
  start = '(' .. page[#page][1]
end
start = '(' .. field(info, 'last-delivered-id')
while true do
  local page = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', 100)
  for _, e in ipairs(page) do released = released + release(e[1], nil) end
  if #page < 100 then break end
  start = '(' .. page[#page][1]
end
redis.call('XGROUP', 'DESTROY', KEYS[1], ARGV[1])
return {1, released}
