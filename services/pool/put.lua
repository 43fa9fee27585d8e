-- PUT (after ack_one.lua and put_entry.lua). After the producer SET the bytes under KEYS[4] (NX, with
-- an expiry, so an upload whose producer died disappears), put_entry. First, the ARGV[4] uploads
-- named next are forgotten (KEYS[3] drops their put_entry records: their producer has read their
-- answers, so it will not send them again), and the entry ids after those are acknowledged (as ACK
-- does): acknowledgements queued by the same pool object travel with its next call.
-- ARGV: group, capacity, upload expiry in ms, count f, f uploads to forget, entry ids to acknowledge.

local wrong = wrong_type('stream', 'hash', 'hash') or wrong_key(5, 'hash')
if wrong then return wrong end
local forget = tonumber(ARGV[4])
if forget > 0 then redis.call('HDEL', KEYS[3], unpack(ARGV, 5, 4 + forget)) end
for i = 5 + forget, #ARGV do ack_one(ARGV[i], 'acknowledged') end
return put_entry()
