-- Library, no KEYS or ARGV. now_ms() → the Redis server clock in ms, so writers on different hosts agree (Lua's own
-- clock and randomness are never used).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
