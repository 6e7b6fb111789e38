-- Library, no KEYS or ARGV. now_ms() → the Redis server clock in ms, so writers on different hosts agree (Lua's own
-- clock and randomness are never used). Read once per script run: every write of one run has the same time.
-- The scripts convert with arithmetic (`x + 0`, `x - x % n`) rather than tonumber and math.floor: in Redis' Lua a call
-- to a C function costs more than the command it guards (docs/performance.md, "What a publish costs Redis").
-- A number handed to redis.call is printed with snprintf's %.17g, about 3 600 instructions; `int` (string.format's %d)
-- about 2 100, once per value however many commands take it. So values written more than once, or often, go as
-- strings made once.
-- string.format is looked up at each call: a function library's code cannot reach `string` while it loads.
local function int(x) return string.format('%d', x) end
local now_cached, now_text = nil, nil
local function now_ms()
  if not now_cached then
    local t = redis.call('TIME')
    local us = t[2] + 0
    now_cached = t[1] * 1000 + (us - us % 1000) / 1000
  end
  return now_cached
end
-- now_ms() as a string, for the commands that write it.
local function now_str()
  if not now_text then now_text = int(now_ms()) end
  return now_text
end
