-- Begins each call of a function that uses now.lua and generation.lua (shared/redis-script.ts redisFunction): a function
-- library's locals live from FUNCTION LOAD on, so the caches those two and publish.lua keep for one run are emptied first.
now_cached, now_text, generation_cached, metas_used = nil, nil, nil, false
