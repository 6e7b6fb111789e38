-- Takes one connection off a roster. Needs now.lua, fan-budget.lua, hooks.lua and presence-prelude.lua before it.
-- KEYS: those of presence-prelude.lua. ARGV: 1-9 those of presence-prelude.lua, 10 member. Returns 1.
drop(ARGV[10], now)
reschedule()
return 1
