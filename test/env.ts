// Loaded before anything reads shared/config: the in-process test suite is one client address creating hundreds of
// accounts a minute, so it raises its own sign-in limit. The limit itself is tested against a worker that keeps a low one.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'

process.env.AUTH_RATE_LIMIT ??= '1000000'
// The same for the platform API's per-class budgets: with the defaults, test/platform/malformed.test.ts (one session
// for every route: over 30 expensive calls a minute) and test/analytics/queries.test.ts (one product: over 120
// analytics runs a minute) are refused 429. Each limit is tested against a worker started with low values
// (test/security/platform-limits.test.ts), which sets its own.
for (const name of ['READS', 'WRITES', 'EXPENSIVE', 'ANALYTICS']) {
  process.env[`PLATFORM_RATE_${name}_PER_MINUTE`] ??= '1000000'
  process.env[`PLATFORM_ORG_RATE_${name}_PER_MINUTE`] ??= '1000000'
}
// Domains are verified without DNS (this machine has none), as under scripts/up; the DNS check itself is tested with a local DNS server.
process.env.MAIL_DEV_VERIFY ??= '1'
// Webhook receivers in the tests listen on 127.0.0.1 over plain http; the production rule is tested in test/unit.
process.env.WEBHOOK_ALLOW_PRIVATE_URLS ??= '1'

// scripts/test exports PLATFORM_SECRET_KEY from .data/secret.key; a plain `bun test` reads (or makes) the same file, so
// secrets sealed by earlier runs against the same database still open.
if (!process.env.PLATFORM_SECRET_KEY) {
  const file = join(import.meta.dir, '..', '.data', 'secret.key')
  if (!existsSync(file)) {
    mkdirSync(join(import.meta.dir, '..', '.data'), { recursive: true })
    // 'wx': two runs starting at once must not each write a different key; the loser reads the winner's.
    try {
      writeFileSync(file, randomBytes(32).toString('base64') + '\n', { mode: 0o600, flag: 'wx' })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
  }
  process.env.PLATFORM_SECRET_KEY = readFileSync(file, 'utf8').trim()
}
