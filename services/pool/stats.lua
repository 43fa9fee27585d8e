-- STATS: a consistent snapshot: {held, pending, produced, acknowledged, redelivered, dead_lettered}.
-- 'malformed' is the counter older versions kept for what is now dead-lettered: added in, so a job's
-- count carries over an upgrade.
-- ARGV: group.

local wrong = wrong_type('stream', 'hash')
if wrong then return wrong end
local held, pending = 0, 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  held = redis.call('XLEN', KEYS[1])
  local summary = redis.pcall('XPENDING', KEYS[1], ARGV[1])
  if type(summary) == 'table' and not summary.err then pending = summary[1] end
end
local c = redis.call('HMGET', KEYS[2], 'produced', 'acknowledged', 'redelivered', 'dead_lettered', 'malformed')
return {held, pending, tonumber(c[1]) or 0, tonumber(c[2]) or 0, tonumber(c[3]) or 0,
  (tonumber(c[4]) or 0) + (tonumber(c[5]) or 0)}
