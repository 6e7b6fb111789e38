-- Deletes a consumer of a hooks stream's group if it has nothing pending, in one step (XGROUP DELCONSUMER would discard
-- its pending entries: one read between a check and the delete would be lost). shared/realtime/hook-events.ts.
-- KEYS: 1 the shard's hooks stream. ARGV: 1 group, 2 consumer. Returns 1 when deleted, else 0.
if #redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2]) > 0 then return 0 end
redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
return 1
