-- STATS: a consistent snapshot of group ARGV[1]:
-- {held, pending, produced, acknowledged, redelivered, dead_lettered, waiting}.
-- held counts the stream (every group's); produced counts the entries added since the group joined (its
-- base in the groups hash KEYS[3]); waiting, those never delivered to it: held - pending while no group
-- is registered (one group), else the entries after its last delivered one.
-- A group the existing stream lacks is the error no_group() (job_keys.lua); not the default group
-- (keys.GROUP), which answers as before: a producer's pool object asks for it, and a job that fans out
-- need not have it.
-- 'malformed' is the counter older versions kept for what is now dead-lettered: added in, so a job's
-- count carries over an upgrade.
-- ARGV: group.

local wrong = wrong_type('stream', 'hash', 'hash')
if wrong then return wrong end
local held, pending, waiting = 0, 0, 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  held = redis.call('XLEN', KEYS[1])
  local summary = redis.pcall('XPENDING', KEYS[1], ARGV[1])
  if type(summary) == 'table' and not summary.err then
    pending = summary[1]
  elseif ARGV[1] ~= 'trainers' then
    return no_group()  -- removed, or never added: its counters would say nothing true
  end
  if redis.call('EXISTS', KEYS[3]) == 0 then
    waiting = held - pending
  else
    local info = group_info(ARGV[1])
    if info then waiting = #redis.call('XRANGE', KEYS[1], '(' .. field(info, 'last-delivered-id'), '+') end
  end
end
local base = tonumber(redis.call('HGET', KEYS[3], ARGV[1])) or 0
local c = redis.call('HMGET', KEYS[2], 'produced', 'acknowledged' .. SUFFIX, 'redelivered' .. SUFFIX,
  'dead_lettered' .. SUFFIX, 'malformed' .. SUFFIX)
return {held, pending, (tonumber(c[1]) or 0) - base, tonumber(c[2]) or 0, tonumber(c[3]) or 0,
  (tonumber(c[4]) or 0) + (tonumber(c[5]) or 0), waiting}
