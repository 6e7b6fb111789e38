// Mailer: `bun run services/mailer/main.ts`. Any number of them: each claims due emails with leases
// (services/mailer/queue.ts). /healthz and /readyz on MAILER_PORT (reusePort: any mailer answers).
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { serveHealth } from '../../shared/http/health'
import { onShutdown } from '../../shared/http/lifecycle'
import { serveMetrics } from '../../shared/metrics/serve'
import { closeRedis } from '../../shared/redis/client'
import { requireSecretKey } from '../../shared/secrets'
import { startMailer } from './mailer'
import { watchQueue } from './metrics'
import { smtpTransport } from './transport'

process.env.PROCESS_NAME ??= 'mailer'
requireSecretKey() // DKIM keys are sealed: without the master key, fail now with a clear message

if (serveMetrics('mailer')) watchQueue()
const transport = smtpTransport(config.mail.smtpUrl, config.mail.smtpTimeoutMs)
const mailer = startMailer(transport)
const health = serveHealth('mailer', config.mailerPort)

// The mailer waits for its attempts in flight up to the SMTP timeout (mailer.stop), then a few seconds to close its
// connections; the process-wide bound is raised to fit both.
onShutdown(async () => {
  health.stop(true)
  await mailer.stop()
  transport.close()
  await sql.end({ timeout: 5 }).catch(() => {})
  await closeRedis()
}, config.mail.smtpTimeoutMs + 10_000)
