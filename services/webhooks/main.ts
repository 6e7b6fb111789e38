// Webhooks: `bun run services/webhooks/main.ts`. Any number of them: each claims due deliveries with leases
// (services/webhooks/queue.ts), and records the Realtime events from the shards' hooks streams (./realtime-events.ts). /healthz and /readyz
// on WEBHOOKS_PORT (reusePort: any webhooks process answers).
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { serveHealth } from '../../shared/http/health'
import { onShutdown } from '../../shared/http/lifecycle'
import { serveMetrics } from '../../shared/metrics/serve'
import { closeRedis } from '../../shared/redis/client'
import { requireSecretKey } from '../../shared/secrets'
import { startDeliverer } from './deliverer'
import { watchPendingDeliveries } from './metrics'
import { startRealtimeEvents } from './realtime-events'

process.env.PROCESS_NAME ??= 'webhooks'
requireSecretKey() // endpoint secrets are sealed: without the master key, fail now with a clear message
// WEBHOOK_LEASE_MS against WEBHOOK_TIMEOUT_MS is checked with the configuration (shared/config/rules.ts).

if (serveMetrics('webhooks')) watchPendingDeliveries()
const deliverer = startDeliverer()
const realtimeEvents = startRealtimeEvents()
const health = serveHealth('webhooks', config.webhooks.port)

// Attempts in flight are bounded by WEBHOOK_TIMEOUT_MS: waited for, so their outcomes are recorded; then the pools close.
onShutdown(async () => {
  health.stop(true)
  await Promise.all([deliverer.stop(), realtimeEvents.stop()])
  await sql.end({ timeout: 5 }).catch(() => {})
  await closeRedis()
}, config.webhooks.timeoutMs + 10_000)
