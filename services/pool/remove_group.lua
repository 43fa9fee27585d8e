-- REMOVE_GROUP: group ARGV[1] is gone (its trial stopped, finished or failed): release at once every
-- entry it had not acknowledged, delivered and pending (with its copy of their bytes) or never delivered
-- to it (job_keys.lua: an entry no other live group needs is deleted with its bytes), destroy its
-- consumer group, and drop its registration (KEYS[4]) and its own counters (KEYS[2]).
-- Returns {1 if it was registered else 0, entries released}.
-- ARGV: group.

local wrong = wrong_type('stream', 'hash', 'hash', 'hash')
if wrong then return wrong end
local registered = redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('HDEL', KEYS[2], 'acknowledged' .. SUFFIX, 'redelivered' .. SUFFIX, 'dead_lettered' .. SUFFIX,
  'malformed' .. SUFFIX)
local info = group_info(ARGV[1])
if info == nil then return {registered, 0} end
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
return {registered, released}
