-- DISCARD: a producer gives up a put whose outcome it may not know (Redis stayed away after sending
-- it, or the pool stayed full). If the put's entry was added after all (the job's KEYS[1] hash maps
-- the upload KEYS[2] to it), only that record goes: the entry stays, with its bytes, and is consumed
-- as any other. Otherwise the upload is removed (its expiry would remove it too, later).

if redis.call('HDEL', KEYS[1], KEYS[2]) == 0 then redis.call('UNLINK', KEYS[2]) end
return 0
