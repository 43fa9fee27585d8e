-- put_entry(): shared by PUT and PUT_REFERENCE (scripts.py prepends it).
-- Append an entry for the bytes under KEYS[4], but only while fewer than capacity (ARGV[2]) entries
-- are held. With n > 1 groups registered in KEYS[5] (a job's sweep trials), the entry's field 'n:<id>'
-- of KEYS[3] counts the groups still to be done with it: n (release in job_keys.lua). Creates the stream and its group when missing (a fresh job, or a Redis that restarted
-- without persistence). Returns the new entry id; the number held when full (and renews the upload's
-- expiry, ARGV[3] ms); or -1 when the upload is gone (expired, or lost in a restart).
-- Idempotent per upload key: KEYS[3] maps the upload to its entry id until the producer has read the
-- answer (its next put forgets it), so a put sent again after a lost answer (a socket timeout while
-- Redis was stalled) gets the same id back instead of adding the subgraph twice. Its SET NX left bytes
-- the entry still uses alone (they have no expiry); a copy it made anew (the entry's bytes had moved
-- or gone) expires, and is removed here.

local function put_entry()
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
  end
  local done = redis.call('HGET', KEYS[3], KEYS[4])
  if done then
    if redis.call('PTTL', KEYS[4]) >= 0 then redis.call('UNLINK', KEYS[4]) end
    return done
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
  local groups = redis.call('HLEN', KEYS[5])
  if groups > 1 then redis.call('HSET', KEYS[3], 'n:' .. id, groups) end
  redis.call('HSET', KEYS[3], KEYS[4], id)
  redis.call('PERSIST', KEYS[4])
  redis.call('HINCRBY', KEYS[2], 'produced', 1)
  return id
end
