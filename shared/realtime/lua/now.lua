-- Library, no KEYS or ARGV. now_ms() → the Redis server clock in ms, so writers on different hosts agree (Lua's own
-- clock and randomness are never used). Read once per script run: every write of one run has the same time.
local now_cached = nil
local function now_ms()
  if not now_cached then
    local t = redis.call('TIME')
    now_cached = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now_cached
end
