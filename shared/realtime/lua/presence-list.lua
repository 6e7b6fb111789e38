-- Reads a roster. Needs now.lua, fan-budget.lua, hooks.lua and presence-prelude.lua before it.
-- KEYS and ARGV: those of presence-prelude.lua. Returns {HGETALL pres, HGETALL presCount}.
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
