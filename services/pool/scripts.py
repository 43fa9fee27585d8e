"""The pool's Redis-side logic: Lua scripts, each one atomic round trip.

Keys of a job share one hash tag, so a Redis Cluster keeps them on one shard:

* ``saintpipe:pool:{JOB}:stream`` (``KEYS[1]``): one small entry per subgraph,
  field ``k`` naming the key that holds its bytes; consumed by the group
  ``ARGV[1]``.
* ``saintpipe:pool:{JOB}:counters`` (``KEYS[2]``): a hash of produced,
  acknowledged, redelivered and malformed.
* ``saintpipe:pool:{JOB}:sg:<random>``: the encoded subgraph, a plain string.
  The bytes live in a string rather than in the stream entry because Redis
  stores a string argument as is, while appending it to a stream copies it
  into the stream's node (a large share of the cost for ~1 MB subgraphs).

An acknowledged entry is deleted from the stream, with its bytes, at once, so
the stream's length is exactly the number of unacknowledged entries: those
waiting for a trainer plus those delivered and pending. That is what the
capacity bounds.
"""

# After the producer SET the bytes under KEYS[3] (with an expiry, so an upload
# whose producer died disappears), append an entry for them, but only while
# fewer than capacity entries are held. Creates the stream and its group when
# missing (a fresh job, or a Redis that restarted without persistence).
# Returns the new entry id; the number held when full (and renews the upload's
# expiry); or -1 when the upload is gone (expired, or lost in a restart).
# ARGV: group, capacity, upload expiry in ms.
PUT = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
end
if redis.call('EXISTS', KEYS[3]) == 0 then
  return -1
end
local held = redis.call('XLEN', KEYS[1])
if held >= tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
  return held
end
local id = redis.call('XADD', KEYS[1], '*', 'k', KEYS[3])
redis.call('PERSIST', KEYS[3])
redis.call('HINCRBY', KEYS[2], 'produced', 1)
return id
"""

# One non-blocking attempt to get an entry: first reclaim one that a consumer
# has held unacknowledged for longer than the visibility timeout (counted as a
# redelivery), else read one never delivered. Returns {id, key of its bytes,
# deliveries} or false. The caller GETs the bytes in a second round trip:
# returning ~1 MB through Lua, or COPYing it to a key the caller could fetch in
# the same pipeline, costs more than that round trip (both copy it inside
# Redis). ARGV: group, consumer, visibility timeout in ms.
GET = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
  return false
end
local start = '0-0'
for _ = 1, 16 do
  local claimed = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], start, 'COUNT', 1)
  local entry = claimed[2][1]
  if entry == nil then break end
  if entry[2] then
    local info = redis.call('XPENDING', KEYS[1], ARGV[1], entry[1], entry[1], 1)
    redis.call('HINCRBY', KEYS[2], 'redelivered', 1)
    return {entry[1], entry[2][2], info[1][4]}
  end
  -- A pending id whose entry was deleted by hand: drop it from the pending list.
  redis.call('XACK', KEYS[1], ARGV[1], entry[1])
  start = claimed[1]
  if start == '0-0' then break end
end
local read = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', 1, 'STREAMS', KEYS[1], '>')
if read then
  local entry = read[1][2][1]
  return {entry[1], entry[2][2], 1}
end
return false
"""

# Acknowledge and delete the entry and its bytes in one step, counted under
# ARGV[3] ('acknowledged', or 'malformed' for an entry that failed to decode).
# Returns 1, or 0 when the entry was no longer pending (acknowledged already,
# or lost in a restart). ARGV: group, entry id, counter.
ACK = """
local n = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
if n == 1 then
  local entry = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])[1]
  if entry then redis.call('UNLINK', entry[2][2]) end
  redis.call('XDEL', KEYS[1], ARGV[2])
  redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
end
return n
"""

# Reset the idle time of an entry this consumer holds (a heartbeat for long
# steps), without taking it from another consumer. Returns 1 if held, else 0.
# ARGV: group, consumer, entry id.
TOUCH = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local info = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if info[1] == nil or info[1][2] ~= ARGV[2] then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
return 1
"""

# A consistent snapshot: {held, pending, produced, acknowledged, redelivered, malformed}.
# ARGV: group.
STATS = """
local held, pending = 0, 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  held = redis.call('XLEN', KEYS[1])
  local summary = redis.pcall('XPENDING', KEYS[1], ARGV[1])
  if type(summary) == 'table' and not summary.err then pending = summary[1] end
end
local c = redis.call('HMGET', KEYS[2], 'produced', 'acknowledged', 'redelivered', 'malformed')
return {held, pending, tonumber(c[1]) or 0, tonumber(c[2]) or 0, tonumber(c[3]) or 0, tonumber(c[4]) or 0}
"""
