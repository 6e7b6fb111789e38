-- Begins each call of a publishing function (shared/realtime/broker.ts publishingParts: now.lua, generation.lua and
-- publish.lua before it; a body without all three would assign a global, which a function may not): a function
-- library's locals live from FUNCTION LOAD on, so the caches those three keep for one run are emptied first.
now_cached, now_text, generation_cached, metas_read = nil, nil, nil, nil
