-- PUT_REFERENCE (after ack_one.lua and put_entry.lua): a shared-memory producer's put in one command.
-- SET NX the ~100-byte slot reference ARGV[4] under KEYS[4] (expiring as PUT's upload), put_entry, and
-- say for each of the producer's ARGV[5] oldest entries (ARGV[6]...) whether it is still in the
-- stream (its slot is free again once it is not). Uploads to forget and entry ids to acknowledge
-- follow, as in PUT, and are handled first.
-- Returns {put_entry's answer, 1 or 0 per entry asked about}.
-- ARGV: group, capacity, upload expiry in ms, reference, count c, c entry ids, count f, f uploads to
-- forget, entry ids to acknowledge.

local wrong = wrong_type('stream', 'hash', 'hash') or wrong_key(5, 'hash')
if wrong then return wrong end
local asked = tonumber(ARGV[5])
local at = 6 + asked
local forget = tonumber(ARGV[at])
if forget > 0 then redis.call('HDEL', KEYS[3], unpack(ARGV, at + 1, at + forget)) end
for i = at + 1 + forget, #ARGV do ack_one(ARGV[i], 'acknowledged') end
redis.call('SET', KEYS[4], ARGV[4], 'PX', ARGV[3], 'NX')
local reply = {put_entry()}
for i = 1, asked do
  reply[i + 1] = #redis.call('XRANGE', KEYS[1], ARGV[5 + i], ARGV[5 + i])
end
return reply
