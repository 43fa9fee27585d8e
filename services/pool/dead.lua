-- DEAD (after ack_one.lua): move entry ARGV[4] to the job's dead-letter stream KEYS[4], but only while
-- consumer ARGV[2] holds it (another may have taken it over meanwhile, and deals with it). The entry
-- leaves the group as an acknowledged one does (released: its bytes deleted, wherever they are, unless
-- other live groups still need them), counted as the group's dead_lettered instead, and KEYS[4] gets a
-- record of it: its id, the reason ARGV[5], the consumer, deliveries ARGV[6], the group and the
-- server's time; trimmed to about ARGV[3] records (MAXLEN ~, cheap). The bytes are
-- not kept: a bound on records would not bound megabytes of them. Returns 1 if moved, else 0.
-- ARGV: group, consumer, dead-letter bound, entry id, reason, deliveries.

local wrong = wrong_type('stream', 'hash', 'hash', 'stream')
if wrong then return wrong end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local info = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[4], ARGV[4], 1)[1]
if info == nil or info[2] ~= ARGV[2] then return 0 end
ack_one(ARGV[4], 'dead_lettered')
local now = redis.call('TIME')
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[3], '*', 'id', ARGV[4], 'reason', ARGV[5],
  'consumer', ARGV[2], 'deliveries', ARGV[6], 'group', ARGV[1], 'time', now[1] .. '.' .. string.format('%06d', now[2]))
return 1
