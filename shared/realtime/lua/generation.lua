-- Library, no KEYS or ARGV. The generation of a channel's epoch: the replication id of the master that numbered its
-- offsets. A replica promoted in a failover, a master restarted from its persistence file, or another master after a
-- slot moved answers a new id, and may lack publications the old one acknowledged; under the same epoch their offsets
-- would be numbered again. So an epoch is trusted only under the generation that started it: otherwise the channel
-- counts as having none, and its next position or publish starts a new epoch (docs/realtime-data-plane.md, "Failover").
-- INFO replication answers it (about 20 000 instructions, more than any other command of a publish). An EVAL script
-- (history, position) asks at each run. A function library (the publish: shared/redis-script.ts redisFunction) keeps
-- the answer for at most trust_ms, and only a master's: its locals die with the library, which a restart, a full
-- resync, FUNCTION FLUSH or RESTORE load anew; a replica never keeps one (a writable replica shares its master's id,
-- which its promotion changes); and a master failed over and back within that time was resynced in part (a full resync
-- loads the library anew), which means it held no write the new master lacked: its epochs may go on.
local trust_ms = 1000
local trusted_gen, trusted_until = nil, 0
-- This run's (run-begins.lua empties it in a function library).
local generation_cached = nil
local function generation()
  if not generation_cached then
    local now = now_ms()
    if trusted_gen and now < trusted_until then
      generation_cached = trusted_gen
    else
      local info = redis.call('INFO', 'replication')
      local at = string.find(info, 'master_replid:', 1, true)
      generation_cached = string.sub(info, at + 14, at + 53)
      if string.find(info, 'role:master', 1, true) then trusted_gen, trusted_until = generation_cached, now + trust_ms
      else trusted_gen = nil end
    end
  end
  return generation_cached
end

-- Whether a meta hash's generation `g` (field g; false in a hash written before generations) allows its epoch under
-- the `current` one. A hash without one was written by an earlier version of the scripts: trusted, and stamped by its
-- next publish.
local function same_generation(g, current)
  return not g or g == current
end
