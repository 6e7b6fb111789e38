// Imported first by the soak, before anything reads shared/config: what the soak's own setup and its processes need on
// a development machine (the same as test/preload.ts sets for the tests). Values already set win.
process.env.LOG_REQUESTS ??= '0'
process.env.AUTH_RATE_LIMIT ??= '1000000'
for (const name of ['READS', 'WRITES', 'EXPENSIVE', 'ANALYTICS']) {
  process.env[`PLATFORM_RATE_${name}_PER_MINUTE`] ??= '1000000'
  process.env[`PLATFORM_ORG_RATE_${name}_PER_MINUTE`] ??= '1000000'
}
// Domains verified without DNS, webhooks to the soak's receiver on 127.0.0.1 (both refused in production).
process.env.MAIL_DEV_VERIFY ??= '1'
process.env.WEBHOOK_ALLOW_PRIVATE_URLS ??= '1'
