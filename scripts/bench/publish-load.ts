// The publish benchmarks' load, one definition for all of them: the public worker's limits lifted, and wrk's Lua that
// posts the same bodies to the platform's route and to a peer's.

/** A public worker's settings under which no publish is refused: its quota, its IP limit and the byte budgets. */
export const LIMITS_LIFTED: Record<string, string> = {
  REALTIME_QUOTA_BURST: '100000000', PUBLIC_IP_RATE_LIMIT: '1000000000',
  REALTIME_PRODUCT_FANOUT_MAX_BYTES: String(1024 ** 3), REALTIME_PRODUCT_HISTORY_MAX_BYTES: String(1024 ** 3),
}

/**
 * wrk's Lua: POSTs {channel, data} bodies of ~70 bytes of data over `channels` in turn, each request its own seq; with
 * the product key as X-Api-Key when given (a peer without keys gets none).
 */
export function publishWrkScript(apiKey: string | null, channels: readonly string[]): string {
  return `wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
${apiKey ? `wrk.headers["X-Api-Key"] = "${apiKey}"` : ''}
local channels = {${channels.map((c) => `"${c}"`).join(', ')}}
local i = 0
request = function()
  i = i + 1
  local body = string.format('{"channel":"%s","data":{"text":"hello from the publish benchmark","seq":%d,"at":%d}}', channels[i % #channels + 1], i, 1790000000000 + i)
  return wrk.format(nil, nil, nil, body)
end
`
}

/** wrk's Lua: POSTs token issue bodies (a subject of its own per request, two channels) with the product key. */
export function tokenIssueWrkScript(apiKey: string): string {
  return `wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Api-Key"] = "${apiKey}"
local i = 0
request = function()
  i = i + 1
  local body = string.format('{"subject":"bench-user-%d","channels":[{"name":"bench:room-%d","ops":["subscribe","history"]},{"name":"bench:lobby","ops":["subscribe"]}],"ttlSeconds":600}', i, i % 16)
  return wrk.format(nil, nil, nil, body)
end
`
}
