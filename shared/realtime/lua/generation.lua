-- Library, no KEYS or ARGV of its own. The generation of a channel's epoch: the replication id of the master that
-- numbered its offsets. A replica promoted in a failover, a master restarted from its persistence file, or another
-- master after a slot moved may lack publications the old one acknowledged; under the same epoch their offsets would be
-- numbered again. So an epoch is trusted only under the generation that started it: otherwise the channel counts as
-- having none, and its next position or publish starts a new epoch (docs/realtime-data-plane.md, "Failover").
-- generation(key, numbering) answers it for the shard whose generation key (keys.ts generationKey) is `key`. The key
-- holds this node's run_id, then the replication id the node numbers the shard's offsets under; it is written with
-- REPL_NONE (never replicated, never in the AOF). A publish (`numbering`: it numbers offsets) trusts it only when its
-- run_id is this node's, and otherwise makes it anew from INFO replication: a restart changes the run_id; a promoted
-- replica holds none or its old master's (copied by a full resync: RDB files carry it); a moved slot brings another
-- node's; a master demoted and resynced in full holds its new master's. One kept across a failover and back is the
-- master's own after a partial resync, which means it held no write the new master lacked: its epochs may go on. So
-- INFO (about 20 000 instructions) runs once per shard and node, not per publish; the run_id once per function library
-- load (INFO server). Reads and positions take the key as it is (INFO replication when there is none): a stale one
-- can only make them take an epoch for live that the next publish, which checks, replaces, never renumber it.
local node_run_id = nil
-- The last key value found to be this node's, and its replication id: most publishes compare one string.
local trusted_value, trusted_gen = nil, nil
-- This run's last shard (run-begins.lua empties it): a broadcast's channels on one shard read the key once.
local generation_key, generation_cached = nil, nil

local function generation(key, numbering)
  if key == generation_key then return generation_cached end
  local value = redis.call('GET', key)
  local gen = nil
  if value and value == trusted_value then gen = trusted_gen
  elseif value and not numbering then gen = string.sub(value, 41)
  else
    if not node_run_id then
      local info = redis.call('INFO', 'server')
      local at = string.find(info, 'run_id:', 1, true)
      node_run_id = string.sub(info, at + 7, at + 46)
    end
    if value and string.sub(value, 1, 40) == node_run_id then gen = string.sub(value, 41)
    else
      -- None, or another node's: this node's now. Only a master's: a replica made writable (replica-read-only no)
      -- shares its master's replication id, and a key it kept would outlive its promotion, which changes that id.
      local info = redis.call('INFO', 'replication')
      local at = string.find(info, 'master_replid:', 1, true)
      gen = string.sub(info, at + 14, at + 53)
      if string.find(info, 'role:master', 1, true) then
        value = node_run_id .. gen
        redis.set_repl(redis.REPL_NONE)
        redis.call('SET', key, value)
        redis.set_repl(redis.REPL_ALL)
      else
        value = nil
      end
    end
    trusted_value, trusted_gen = value, gen
  end
  generation_key, generation_cached = key, gen
  return gen
end

-- Whether a meta hash's generation `g` (field g; false in a hash written before generations) allows its epoch under
-- the `current` one. A hash without one was written by an earlier version of the scripts: trusted, and stamped by its
-- next publish.
local function same_generation(g, current)
  return not g or g == current
end
