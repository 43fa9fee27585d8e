-- ack_one(id, counter): shared by PUT, PUT_REFERENCE, GET, ACK and DEAD (scripts.py prepends it,
-- after job_keys.lua).
-- Acknowledge entry id of the group ARGV[1] of stream KEYS[1]; if it was pending, delete it and its
-- bytes (KEYS[3] says where GET moved them; else the entry's field k) and count it under counter in
-- KEYS[2]. Returns 1 if it was pending, else 0. XACK on a missing stream is 0.
-- Bytes are deleted only if they are the job's own subgraph bytes (job_keys.lua): an entry, or a record
-- of KEYS[3], naming any other key leaves that key alone.

local function ack_one(id, counter)
  if redis.call('XACK', KEYS[1], ARGV[1], id) == 0 then return 0 end
  local bytes = redis.call('HGET', KEYS[3], id)
  if bytes then
    redis.call('HDEL', KEYS[3], id)
  else
    local entry = redis.call('XRANGE', KEYS[1], id, id)[1]
    if entry then bytes = entry_bytes(entry[2]) end
  end
  if bytes and bytes_state(bytes) == 'string' then redis.call('UNLINK', bytes) end
  redis.call('XDEL', KEYS[1], id)
  redis.call('HINCRBY', KEYS[2], counter, 1)
  return 1
end
