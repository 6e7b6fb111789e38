-- Library, no KEYS or ARGV: count_in(key, amount, expiry) counts `amount` (a number) hits in a fixed window's counter
-- (shared/fixed-window.ts: its name carries the window number) and returns the count. The counter gets its expiry
-- (the window and 5 s) at the window's first hit, in the same step. One hit is an INCR: a Lua number handed to
-- redis.call is printed as a float first, which costs more than the command.
local function count_in(key, amount, expiry)
  local count = amount == 1 and redis.call('INCR', key) or redis.call('INCRBY', key, amount)
  if count == amount then redis.call('EXPIRE', key, expiry) end
  return count
end
