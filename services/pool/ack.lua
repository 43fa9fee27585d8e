-- ACK (after ack_one.lua): acknowledge entries and delete them and their bytes (wherever GET moved
-- them), each counted under ARGV[2] ('acknowledged'). With a consumer name in ARGV[3], only entries
-- that consumer holds. Returns how many were pending (for that consumer) and are now gone; the others
-- were acknowledged already, taken over, or lost in a restart; or, when one was not pending and the
-- stream exists without the group (removed, or never added), the error no_group() (job_keys.lua): nothing
-- was acknowledged then. With a consumer name, XPENDING raises Redis's own NOGROUP instead, as early.
-- ARGV: group, counter, consumer or '', entry ids.

local wrong = wrong_type('stream', 'hash', 'hash')
if wrong then return wrong end
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
-- Looked for only when something was not pending: an acknowledgement that counts costs nothing more.
if done < #ARGV - 3 and redis.call('EXISTS', KEYS[1]) == 1 and group_info(ARGV[1]) == nil then
  return no_group()
end
return done
