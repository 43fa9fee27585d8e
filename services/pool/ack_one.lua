-- ack_one(id, counter): shared by PUT, PUT_REFERENCE, GET, ACK and DEAD (scripts.py prepends it,
-- after job_keys.lua).
-- Acknowledge entry id of the group ARGV[1] of stream KEYS[1]; if it was pending, count it under counter
-- (with the group's SUFFIX) in KEYS[2] and release it (job_keys.lua): deleted with its bytes when no
-- other live group still needs it, else only the group's copy of them (KEYS[3] says where GET moved
-- them). Returns 1 if it was pending, else 0. XACK on a missing stream is 0.
-- Bytes are deleted only if they are the job's own subgraph bytes (job_keys.lua): an entry, or a record
-- of KEYS[3], naming any other key leaves that key alone.

local function ack_one(id, counter)
  if redis.call('XACK', KEYS[1], ARGV[1], id) == 0 then return 0 end
  local field = id .. SUFFIX
  local copy = redis.call('HGET', KEYS[3], field)
  if copy then redis.call('HDEL', KEYS[3], field) end
  release(id, copy)
  redis.call('HINCRBY', KEYS[2], counter .. SUFFIX, 1)
  return 1
end
