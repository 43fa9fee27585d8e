-- TOUCH: reset the idle time of an entry this consumer holds (a heartbeat for long steps), without
-- taking it from another consumer. Returns 1 if held, else 0.
-- ARGV: group, consumer, entry id.

local wrong = wrong_type('stream')
if wrong then return wrong end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local info = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if info[1] == nil or info[1][2] ~= ARGV[2] then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
return 1
