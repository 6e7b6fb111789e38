// Public worker: `bun run services/public/main.ts`. Several workers share PUBLIC_PORT (reusePort).
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { serveApp } from '../../shared/http/serve'
import { usage } from '../../shared/realtime/usage'
import { serveMetrics } from '../../shared/metrics/serve'
import { closeRedis } from '../../shared/redis/client'
import { requireSecretKey } from '../../shared/secrets'
import { buildPublicApp } from './app'
import { listenForCacheInvalidations } from './invalidation'
import { MESSAGES_BODY_LIMIT } from './http/body'

process.env.PROCESS_NAME ??= 'public'
requireSecretKey() // token signing keys are sealed: without the master key, fail now with a clear message

// Caches stay off until the invalidation subscription is live (shared/realtime/invalidation-listener.ts), so serving
// can start now.
const stopListening = listenForCacheInvalidations()
usage.start()

serveMetrics('public')
serveApp({
  name: 'public',
  port: config.publicPort,
  app: buildPublicApp(),
  // Routes answer 413 in the error shape themselves (from Content-Length, or while streaming). Bun's own cap answers a
  // bare 413 with no body, so it sits well above the largest route limit: only absurd bodies ever meet it.
  maxRequestBodySize: MESSAGES_BODY_LIMIT * 64,
  logRequests: config.logRequests,
  onStop: async () => {
    await stopListening()
    await usage.stop()
    await sql.end({ timeout: 5 })
    await closeRedis()
  },
})
