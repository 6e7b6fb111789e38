// Imported first by analytics.ts, so the setting is read when the config loads: the peers' worst cases may need more
// than the API's default 10 s statement timeout, and both sides get the same allowance.
process.env.ANALYTICS_QUERY_TIMEOUT_MS ??= '120000'
