-- Publishes one message (publish_one in publish.lua, which comes before it with its libraries): KEYS and ARGV as
-- publish.lua's K and A. Returns its reply.
if redis.replicate_commands then redis.replicate_commands() end
return publish_one(KEYS, ARGV)
