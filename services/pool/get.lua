-- GET (after ack_one.lua): one non-blocking attempt to get an entry: one that a consumer has held
-- unacknowledged for longer than the visibility timeout (a redelivery, counted), or one never
-- delivered. With ARGV[4] = '1' abandoned entries are looked for first; otherwise only when there is
-- no new entry (the caller asks for the first order every so often rather than on every call:
-- XAUTOCLAIM is a large share of this script's work). The entry's bytes are then RENAMEd to KEYS[4], a
-- fresh key the caller chose and GETs in the same round trip (a rename moves a pointer; returning
-- ~1 MB through Lua would copy it twice), and KEYS[3] records where they went, for ACK and for a later
-- redelivery.
-- Entry ids from ARGV[5] on are acknowledged first (as ACK does): a consumer's acknowledgement of its
-- last entry travels with its next GET.
-- Returns {id, deliveries, 1, acked}, {id, deliveries, 0, acked} when the bytes are missing, or
-- {false, 0, 0, acked} when there is no entry; acked counts the acknowledged entries that were pending.
-- ARGV: group, consumer, visibility timeout in ms, abandoned first (1 or 0), entry ids to acknowledge.

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
