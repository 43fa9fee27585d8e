-- RECOVER: consumer ARGV[2], restarted under the same name, takes back at once the entries it still
-- holds from its previous life instead of waiting out the visibility timeout. Each is claimed again
-- by it (XCLAIM: idle time reset, so no other consumer takes it meanwhile; delivery count
-- incremented) and counted as redelivered, unless that makes more than ARGV[3] deliveries (0: no
-- limit: the consumer dead-letters it instead, as after GET). A pending id whose entry was deleted by
-- hand is dropped with its bytes, if they are the job's own (as GET's claim does). Returns the ids, oldest first: the consumer's
-- next GETs ask for them by id.
-- ARGV: group, consumer, most deliveries.

local wrong = wrong_type('stream', 'hash', 'hash')
if wrong then return wrong end
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local ids, start = {}, '-'
while true do
  local page = redis.call('XPENDING', KEYS[1], ARGV[1], start, '+', 100, ARGV[2])
  for _, p in ipairs(page) do ids[#ids + 1] = p[1] end
  if #page < 100 then break end
  start = '(' .. page[#page][1]
end
local recovered, counted = {}, 0
for _, id in ipairs(ids) do
  if redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, id)[1] then
    recovered[#recovered + 1] = id
    local deliveries = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)[1][4]
    if ARGV[3] == '0' or deliveries <= tonumber(ARGV[3]) then counted = counted + 1 end
  else
    redis.call('XACK', KEYS[1], ARGV[1], id)
    local orphan = redis.call('HGET', KEYS[3], id .. SUFFIX)
    if orphan then
      if bytes_state(orphan) == 'string' then redis.call('UNLINK', orphan) end
      redis.call('HDEL', KEYS[3], id .. SUFFIX)
    end
  end
end
if counted > 0 then redis.call('HINCRBY', KEYS[2], 'redelivered' .. SUFFIX, counted) end
return recovered
