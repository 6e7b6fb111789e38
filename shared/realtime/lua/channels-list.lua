-- One page of a product's active channels on one shard, by name. Needs now.lua before it.
-- KEYS: 1 the index's names (zset, score 0), 2 its expiry (channel → latest lease expiry, ms), 3 its subscriptions
--       (channel → subscriptions) (keys.ts, productChannelIndex)
-- ARGV: 1 the lowest name, as ZRANGEBYLEX takes it ('-', '[prefix' or '(after'), 2 the highest ('+' or '(prefix\127'),
--       3 how many channels at most
-- Returns {flat {channel, subscriptions, ...}, cut}: cut is '' when the range was read to its end or the page filled,
-- else the last name looked at (the page is complete only up to it: stale entries used up the reads).
-- Channels whose every lease expired (their gateways died) are dropped from the index here: up to 1 000 of the oldest
-- first, then every one the page meets, looking at no more than 5 000 names in all.
local now = now_ms()
local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 1000)
local function drop(name)
  redis.call('ZREM', KEYS[1], name)
  redis.call('ZREM', KEYS[2], name)
  redis.call('HDEL', KEYS[3], name)
end
for i = 1, #stale do drop(stale[i]) end
local want = ARGV[3] + 0
local out = {}
local found = 0
local lower = ARGV[1]
local budget = 5000
while found < want do
  if budget <= 0 then return {out, string.sub(lower, 2)} end
  local fetch = math.min(budget, math.max(want - found, 64))
  local names = redis.call('ZRANGEBYLEX', KEYS[1], lower, ARGV[2], 'LIMIT', 0, fetch)
  budget = budget - #names
  for i = 1, #names do
    local expiry = redis.call('ZSCORE', KEYS[2], names[i])
    if expiry and expiry + 0 > now then
      if found < want then
        found = found + 1
        out[#out + 1] = names[i]
        out[#out + 1] = redis.call('HGET', KEYS[3], names[i]) or '0'
      end
    else
      drop(names[i])
    end
  end
  if #names < fetch then return {out, ''} end
  lower = '(' .. names[#names]
end
return {out, ''}
