"""The pool's Redis-side logic: Lua scripts, each one atomic round trip.

Keys of a job share one hash tag, so a Redis Cluster keeps them on one shard:

* ``saintpipe:pool:{JOB}:stream`` (``KEYS[1]``): one small entry per subgraph,
  field ``k`` naming the key that holds its bytes; consumed by the group
  ``ARGV[1]``.
* ``saintpipe:pool:{JOB}:counters`` (``KEYS[2]``): a hash of produced,
  acknowledged, redelivered and malformed.
* ``saintpipe:pool:{JOB}:at`` (``KEYS[3]``, but for STATS and TOUCH): a hash from the id of each
  delivered entry to the key that now holds its bytes (GET renames them to a
  key the consumer named, so that it can fetch them in the same round trip).
* ``saintpipe:pool:{JOB}:sg:<random>``: the encoded subgraph, a plain string.
  The bytes live in a string rather than in the stream entry because Redis
  stores a string argument as is, while appending it to a stream copies it
  into the stream's node (a large share of the cost for ~1 MB subgraphs).

An acknowledged entry is deleted from the stream, with its bytes, at once, so
the stream's length is exactly the number of unacknowledged entries: those
waiting for a trainer plus those delivered and pending. That is what the
capacity bounds.
"""

# Shared by PUT, GET and ACK: acknowledge entry ``id`` of the group ARGV[1] of stream
# KEYS[1]; if it was pending, delete it and its bytes (KEYS[3] says where GET
# moved them; else the entry's field k) and count it under ``counter`` in
# KEYS[2]. Returns 1 if it was pending, else 0. XACK on a missing stream is 0.
_ACK_ONE = """
local function ack_one(id, counter)
  if redis.call('XACK', KEYS[1], ARGV[1], id) == 0 then return 0 end
  local bytes = redis.call('HGET', KEYS[3], id)
  if bytes then
    redis.call('HDEL', KEYS[3], id)
  else
    local entry = redis.call('XRANGE', KEYS[1], id, id)[1]
    if entry then bytes = entry[2][2] end
  end
  if bytes then redis.call('UNLINK', bytes) end
  redis.call('XDEL', KEYS[1], id)
  redis.call('HINCRBY', KEYS[2], counter, 1)
  return 1
end
"""

# Append an entry for the bytes under KEYS[4], but only while fewer than
# capacity entries are held. Creates the stream and its group when missing (a
# fresh job, or a Redis that restarted without persistence). Returns the new
# entry id; the number held when full (and renews the upload's expiry,
# ARGV[3] ms); or -1 when the upload is gone (expired, or lost in a restart).
_PUT_ENTRY = """
local function put_entry()
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
  end
  if redis.call('EXISTS', KEYS[4]) == 0 then
    return -1
  end
  local held = redis.call('XLEN', KEYS[1])
  if held >= tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[4], ARGV[3])
    return held
  end
  local id = redis.call('XADD', KEYS[1], '*', 'k', KEYS[4])
  redis.call('PERSIST', KEYS[4])
  redis.call('HINCRBY', KEYS[2], 'produced', 1)
  return id
end
"""

# After the producer SET the bytes under KEYS[4] (with an expiry, so an upload
# whose producer died disappears), put_entry. Entry ids from ARGV[4] on are
# acknowledged first (as ACK does): acknowledgements queued by the same pool
# object travel with its next call.
# ARGV: group, capacity, upload expiry in ms, entry ids to acknowledge.
PUT = (
    _ACK_ONE
    + _PUT_ENTRY
    + """
for i = 4, #ARGV do ack_one(ARGV[i], 'acknowledged') end
return put_entry()
"""
)

# A shared-memory producer's put in one command: SET the ~100-byte slot
# reference ARGV[4] under KEYS[4] (expiring as PUT's upload), put_entry, and
# say for each of the producer's ARGV[5] oldest entries (ARGV[6]...) whether
# it is still in the stream (its slot is free again once it is not). Entry ids
# after those are acknowledged first.
# Returns {put_entry's answer, 1 or 0 per entry asked about}.
# ARGV: group, capacity, upload expiry in ms, reference, count c, c entry ids, entry ids to acknowledge.
PUT_REFERENCE = (
    _ACK_ONE
    + _PUT_ENTRY
    + """
local asked = tonumber(ARGV[5])
for i = 6 + asked, #ARGV do ack_one(ARGV[i], 'acknowledged') end
redis.call('SET', KEYS[4], ARGV[4], 'PX', ARGV[3])
local reply = {put_entry()}
for i = 1, asked do
  reply[i + 1] = #redis.call('XRANGE', KEYS[1], ARGV[5 + i], ARGV[5 + i])
end
return reply
"""
)

# One non-blocking attempt to get an entry: one that a consumer has held
# unacknowledged for longer than the visibility timeout (a redelivery,
# counted), or one never delivered. With ARGV[4] = '1' abandoned entries are
# looked for first; otherwise only when there is no new entry (the caller asks
# for the first order every so often rather than on every call: XAUTOCLAIM is
# a large share of this script's work). The entry's bytes are then RENAMEd to
# KEYS[4], a fresh key the caller chose and GETs in the same round trip (a
# rename moves a pointer; returning ~1 MB through Lua would copy it twice), and
# KEYS[3] records where they went, for ACK and for a later redelivery.
# Entry ids from ARGV[5] on are acknowledged first (as ACK does): a consumer's
# acknowledgement of its last entry travels with its next GET.
# Returns {id, deliveries, 1, acked}, {id, deliveries, 0, acked} when the bytes
# are missing, or {false, 0, 0, acked} when there is no entry; acked counts the
# acknowledged entries that were pending. ARGV: group, consumer, visibility
# timeout in ms, abandoned first (1 or 0), entry ids to acknowledge.
GET = (
    _ACK_ONE
    + """
local acked = 0
for i = 5, #ARGV do acked = acked + ack_one(ARGV[i], 'acknowledged') end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
  return {false, 0, 0, acked}
end
local function claim()
  local start = '0-0'
  for _ = 1, 16 do
    local claimed = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], start, 'COUNT', 1)
    local entry = claimed[2][1]
    if entry == nil then return nil end
    if entry[2] then
      local info = redis.call('XPENDING', KEYS[1], ARGV[1], entry[1], entry[1], 1)
      redis.call('HINCRBY', KEYS[2], 'redelivered', 1)
      return entry[1], redis.call('HGET', KEYS[3], entry[1]) or entry[2][2], info[1][4]
    end
    -- A pending id whose entry was deleted by hand: drop it from the pending list, with its bytes.
    redis.call('XACK', KEYS[1], ARGV[1], entry[1])
    local orphan = redis.call('HGET', KEYS[3], entry[1])
    if orphan then
      redis.call('UNLINK', orphan)
      redis.call('HDEL', KEYS[3], entry[1])
    end
    start = claimed[1]
    if start == '0-0' then return nil end
  end
  return nil
end
local function read_new()
  local read = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', 1, 'STREAMS', KEYS[1], '>')
  if not read then return nil end
  local entry = read[1][2][1]
  return entry[1], entry[2][2], 1
end
local id, bytes, deliveries
if ARGV[4] == '1' then id, bytes, deliveries = claim() end
if id == nil then id, bytes, deliveries = read_new() end
if id == nil and ARGV[4] ~= '1' then id, bytes, deliveries = claim() end
if id == nil then return {false, 0, 0, acked} end
if redis.call('EXISTS', bytes) == 0 then
  return {id, deliveries, 0, acked}
end
redis.call('RENAME', bytes, KEYS[4])
redis.call('HSET', KEYS[3], id, KEYS[4])
return {id, deliveries, 1, acked}
"""
)

# Acknowledge entries and delete them and their bytes (wherever GET moved
# them), each counted under ARGV[2] ('acknowledged', or 'malformed' for an
# entry that failed to decode). With a consumer name in ARGV[3], only entries
# that consumer holds. Returns how many were pending (for that consumer) and
# are now gone; the others were acknowledged already, taken over, or lost in a
# restart. ARGV: group, counter, consumer or '', entry ids.
ACK = (
    _ACK_ONE
    + """
local done = 0
for i = 4, #ARGV do
  local id = ARGV[i]
  local mine = true
  if ARGV[3] ~= '' then
    if redis.call('EXISTS', KEYS[1]) == 0 then return done end
    local info = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
    mine = info[1] ~= nil and info[1][2] == ARGV[3]
  end
  if mine then done = done + ack_one(id, ARGV[2]) end
end
return done
"""
)

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
