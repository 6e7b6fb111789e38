-- Library, no KEYS or ARGV. The generation of a channel's epoch: the replication id of the master that numbered its
-- offsets. A replica promoted in a failover, a master restarted from its persistence file, or another master after a
-- slot moved answers a new id, and may lack publications the old one acknowledged; under the same epoch their offsets
-- would be numbered again. So an epoch is trusted only under the generation that started it: otherwise the channel
-- counts as having none, and its next position or publish starts a new epoch (docs/realtime-data-plane.md, "Failover").
-- About 1.5 µs of Redis time (INFO replication): asked once per script run, however many channels the run writes.
local generation_cached = nil
local function generation()
  if not generation_cached then
    local info = redis.call('INFO', 'replication')
    local at = string.find(info, 'master_replid:', 1, true)
    generation_cached = string.sub(info, at + 14, at + 53)
  end
  return generation_cached
end

-- Whether a meta hash's generation `g` (field g; false in a hash written before generations) allows its epoch under
-- the `current` one. A hash without one was written by an earlier version of the scripts: trusted, and stamped by its
-- next publish.
local function same_generation(g, current)
  return not g or g == current
end
