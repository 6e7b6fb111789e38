-- Takes one connection off a roster. Needs now.lua, fan-budget.lua and presence-prelude.lua before it.
-- KEYS: those of presence-prelude.lua. ARGV: 1-6 those of presence-prelude.lua, 7 member. Returns 1.
drop(ARGV[7])
return 1
