-- Checks on the keys a script acts on; shared by every script but DISCARD (scripts.py puts it first).
-- The job's fixed keys (KEYS[1] the stream, then the counters, the at hash, the dead letters) hold what
-- saintpipe writes there unless something else changed them: wrong_type answers the pool's own error,
-- naming the key, instead of a raw WRONGTYPE from the middle of a script (which would also have run
-- half of it). The key an entry names (field k), or the at hash names for it, is data, not trusted:
-- another job's stream, this job's counters or a key outside saintpipe would be renamed away or
-- deleted. Such a key is looked at only if it starts with the job's bytes prefix (derived from KEYS[1],
-- saintpipe:pool:{JOB}:stream), and used only if it holds a string.

-- wrong_type(kind, ...): nil when each KEYS[i] holds the i-th kind (or does not exist); else the error
-- reply 'SAINTPIPE-WRONGTYPE <found> <expected> <key>' (connection.py turns it into StateCorrupted).
local function wrong_type(...)
  local kinds = {...}
  for i = 1, #kinds do
    local found = redis.call('TYPE', KEYS[i])['ok']
    if found ~= kinds[i] and found ~= 'none' then
      return redis.error_reply('SAINTPIPE-WRONGTYPE ' .. found .. ' ' .. kinds[i] .. ' ' .. KEYS[i])
    end
  end
  return nil
end

local bytes_prefix = string.sub(KEYS[1], 1, -7) .. 'sg:'

-- bytes_state(key): 'string' (bytes to use), 'none' (gone), 'foreign' (not one of the job's subgraph
-- keys: not even its type is asked), or the type the key holds instead. One prefix test and one TYPE.
local function bytes_state(key)
  if string.sub(key, 1, #bytes_prefix) ~= bytes_prefix then return 'foreign' end
  return redis.call('TYPE', key)['ok']
end

-- entry_bytes(fields): the key field k of a stream entry names, or nil (only k: not whatever comes first).
local function entry_bytes(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'k' then return fields[i + 1] end
  end
  return nil
end
