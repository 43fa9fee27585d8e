-- GET (after ack_one.lua): one non-blocking attempt to get an entry: one that a consumer has held
-- unacknowledged for longer than the visibility timeout (a redelivery, counted), or one never
-- delivered. With ARGV[4] = '1' abandoned entries are looked for first; otherwise only when there is
-- no new entry (the caller asks for the first order every so often rather than on every call:
-- XAUTOCLAIM is a large share of this script's work). ARGV[4] may instead be the id of an entry this
-- consumer took back with RECOVER: it comes first, if the consumer still holds it. The entry's bytes
-- are then RENAMEd to KEYS[4], a fresh key the caller chose and GETs in the same round trip (a rename
-- moves a pointer; returning ~1 MB through Lua would copy it twice), and KEYS[3] records where they
-- went, for ACK and for a later redelivery.
-- With other live groups still to be done with the entry (its count in KEYS[3], put_entry.lua), its bytes
-- are COPYed instead: the others read them too; each group's copy is its own (field id@group of KEYS[3]).
-- KEYS[4] must not exist yet: if it does, this very call has run before (it was sent again after its
-- answer was lost) and renaming another entry's bytes onto it would destroy the first one's; nothing
-- is taken then (the first entry stays pending and comes back after the visibility timeout).
-- An entry claimed for more than ARGV[5] deliveries (0: no limit) is not counted as redelivered: the
-- caller moves it to the dead-letter stream instead of handing it out (DEAD).
-- Entry ids from ARGV[6] on are acknowledged first (as ACK does): a consumer's acknowledgement of its
-- last entry travels with its next GET.
-- The key naming the bytes is checked first (job_keys.lua): one that is not the job's own subgraph
-- bytes is neither renamed nor read; the caller dead-letters the entry (DEAD leaves that key alone too).
-- Returns {id, deliveries, 1, acked}, {id, deliveries, 0, acked} when the bytes are missing,
-- {id, deliveries, 0, acked, key, state} when they cannot be used (key '': the entry has no field k;
-- state: 'foreign', the key is not one of the job's subgraph keys, or the type the key holds), or
-- {false, 0, 0, acked} when there is no entry; acked counts the acknowledged entries that were pending.
-- ARGV: group, consumer, visibility timeout in ms, abandoned first (1 or 0) or a recovered entry id,
-- most deliveries, entry ids to acknowledge.

if redis.call('EXISTS', KEYS[4]) == 1 then return {false, 0, 0, 0} end
local wrong = wrong_type('stream', 'hash', 'hash')
if wrong then return wrong end
local acked = 0
for i = 6, #ARGV do acked = acked + ack_one(ARGV[i], 'acknowledged') end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
  return {false, 0, 0, acked}
end
local moved = false  -- whether the bytes found are the group's own copy (a redelivery), not the entry's
local function claim()
  local start = '0-0'
  for _ = 1, 16 do
    local claimed = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], start, 'COUNT', 1)
    local entry = claimed[2][1]
    if entry == nil then return nil end
    if entry[2] then
      local deliveries = redis.call('XPENDING', KEYS[1], ARGV[1], entry[1], entry[1], 1)[1][4]
      if ARGV[5] == '0' or deliveries <= tonumber(ARGV[5]) then
        redis.call('HINCRBY', KEYS[2], 'redelivered' .. SUFFIX, 1)
      end
      local copy = redis.call('HGET', KEYS[3], entry[1] .. SUFFIX)
      moved = copy ~= false
      return entry[1], copy or entry_bytes(entry[2]), deliveries
    end
    -- A pending id whose entry was deleted by hand: drop it from the pending list, with its bytes.
    redis.call('XACK', KEYS[1], ARGV[1], entry[1])
    local orphan = redis.call('HGET', KEYS[3], entry[1] .. SUFFIX)
    if orphan then
      if bytes_state(orphan) == 'string' then redis.call('UNLINK', orphan) end
      redis.call('HDEL', KEYS[3], entry[1] .. SUFFIX)
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
  return entry[1], entry_bytes(entry[2]), 1
end
local function recovered(id)
  local info = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)[1]
  if info == nil or info[2] ~= ARGV[2] then return nil end  -- acknowledged, or taken over since
  local bytes = redis.call('HGET', KEYS[3], id .. SUFFIX)
  moved = bytes ~= false
  if not bytes then
    local entry = redis.call('XRANGE', KEYS[1], id, id)[1]
    if entry == nil then return nil end  -- deleted by hand: claim() drops it once it is idle
    bytes = entry_bytes(entry[2])
  end
  return id, bytes, info[4]
end
local id, bytes, deliveries
if #ARGV[4] > 1 then id, bytes, deliveries = recovered(ARGV[4]) end
if id == nil and ARGV[4] == '1' then id, bytes, deliveries = claim() end
if id == nil then id, bytes, deliveries = read_new() end
if id == nil and ARGV[4] ~= '1' then id, bytes, deliveries = claim() end
if id == nil then return {false, 0, 0, acked} end
if not bytes then return {id, deliveries, 0, acked, '', 'none'} end
local state = bytes_state(bytes)  -- instead of EXISTS: the check costs no extra call
if state == 'none' then return {id, deliveries, 0, acked} end
if state ~= 'string' then return {id, deliveries, 0, acked, bytes, state} end
local shared = false
if not moved then
  local left = redis.call('HGET', KEYS[3], 'n:' .. id)
  shared = left and tonumber(left) > 1
end
if shared then redis.call('COPY', bytes, KEYS[4]) else redis.call('RENAME', bytes, KEYS[4]) end
redis.call('HSET', KEYS[3], id .. SUFFIX, KEYS[4])
return {id, deliveries, 1, acked}
