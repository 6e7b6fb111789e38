-- Publishes one message (publish_one in publish.lua, which comes before it with its libraries): KEYS its seven keys and
-- ARGV its nine values, in publish_one's order. Returns {offset, epoch} when stored, {} when published without history,
-- {-1, budget, ms} when refused.
local a, b, c = publish_one(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[1] + 0, ARGV[2] + 0, ARGV[3],
  ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
if a == -1 then return {a, b, c} end
if a then return {a, b} end
return {}
