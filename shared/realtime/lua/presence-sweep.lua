-- Only the prelude: drops expired connections, emitting their identities' leaves. Needs now.lua, fan-budget.lua, hooks.lua and
-- presence-prelude.lua before it. KEYS and ARGV: those of presence-prelude.lua. Returns 1.
return 1
