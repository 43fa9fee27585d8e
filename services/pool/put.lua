-- PUT (after ack_one.lua and put_entry.lua). After the producer SET the bytes under KEYS[4] (with an
-- expiry, so an upload whose producer died disappears), put_entry. Entry ids from ARGV[4] on are
-- acknowledged first (as ACK does): acknowledgements queued by the same pool object travel with its
-- next call.
-- ARGV: group, capacity, upload expiry in ms, entry ids to acknowledge.

for i = 4, #ARGV do ack_one(ARGV[i], 'acknowledged') end
return put_entry()
