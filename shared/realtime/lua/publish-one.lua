-- Publishes one message (publish_one in publish.lua, which comes before it with its libraries): KEYS and ARGV as
-- publish.lua's K and A. Returns {offset, epoch} when stored, {} when published without history, {-1, budget, ms} when
-- refused.
local a, b, c = publish_one(KEYS, 0, ARGV, 0, ARGV[8])
if a == -1 then return {a, b, c} end
if a then return {a, b} end
return {}
