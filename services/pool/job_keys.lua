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
-- wrong_key(i, kind): the same for KEYS[i] alone.
local function wrong_key(i, kind)
  local found = redis.call('TYPE', KEYS[i])['ok']
  if found ~= kind and found ~= 'none' then
    return redis.error_reply('SAINTPIPE-WRONGTYPE ' .. found .. ' ' .. kind .. ' ' .. KEYS[i])
  end
  return nil
end
local function wrong_type(...)
  local kinds = {...}
  for i = 1, #kinds do
    local wrong = wrong_key(i, kinds[i])
    if wrong then return wrong end
  end
  return nil
end

-- group_info(name): the fields XINFO GROUPS gives for group name of the stream KEYS[1] (name, consumers,
-- pending, last-delivered-id, as a flat list), or nil.
local function group_info(name)
  if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    for i = 1, #g, 2 do
      if g[i] == 'name' and g[i + 1] == name then return g end
    end
  end
  return nil
end

-- no_group(): the error reply 'SAINTPIPE-NOGROUP <group> <stream key>' for group ARGV[1], which the existing
-- stream KEYS[1] does not have (removed, or never added); connection.py turns it, and Redis's own NOGROUP
-- from a stream command, into one InvalidArgument naming the job and the group.
local function no_group()
  return redis.error_reply('SAINTPIPE-NOGROUP ' .. ARGV[1] .. ' ' .. KEYS[1])
end

-- field(info, name): the value of field name in a flat XINFO list.
local function field(info, name)
  for i = 1, #info, 2 do
    if info[i] == name then return info[i + 1] end
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

-- SUFFIX: what ends the fields of group ARGV[1]'s own counters (KEYS[2]) and records of where its copy of
-- an entry's bytes went (KEYS[3]). The default group (keys.GROUP) has none, as before a job could have
-- several groups; another group's are its name after '@' (group names have no '@').
local SUFFIX = ''
if ARGV[1] ~= 'trainers' then SUFFIX = '@' .. ARGV[1] end

-- release(id, copy): one live group is done with entry id (acknowledged or dead-lettered it, or the group
-- was removed); copy is the key holding that group's bytes of it (nil: none moved them). An entry put while
-- n > 1 groups were registered has a count of groups still to be done in KEYS[3] field 'n:<id>': the
-- group's copy goes, and the count goes down. The last one (or the only one: no count) deletes the entry
-- and its bytes, wherever they are. Returns 1 if the entry was released.
local function release(id, copy)
  local count = 'n:' .. id
  local left = redis.call('HGET', KEYS[3], count)
  if left and tonumber(left) > 1 then
    redis.call('HINCRBY', KEYS[3], count, -1)
    if copy and bytes_state(copy) == 'string' then redis.call('UNLINK', copy) end
    return 0
  end
  local bytes = copy
  if left or not bytes then
    if left then redis.call('HDEL', KEYS[3], count) end
    local entry = redis.call('XRANGE', KEYS[1], id, id)[1]
    if entry then
      local original = entry_bytes(entry[2])
      if bytes == nil then bytes = original
      elseif original and original ~= bytes and bytes_state(original) == 'string' then redis.call('UNLINK', original) end
    end
  end
  if bytes and bytes_state(bytes) == 'string' then redis.call('UNLINK', bytes) end
  redis.call('XDEL', KEYS[1], id)
  return 1
end
