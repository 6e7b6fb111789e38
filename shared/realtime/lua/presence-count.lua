-- Counts a roster. Needs now.lua, fan-budget.lua, hooks.lua and presence-prelude.lua before it.
-- KEYS and ARGV: those of presence-prelude.lua. Returns {identities, live connections}.
return {redis.call('HLEN', KEYS[2]), redis.call('ZCARD', KEYS[3])}
