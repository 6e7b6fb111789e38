// Platform API worker: `bun run services/api/main.ts`. Several workers share API_PORT (reusePort).
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { serveApp } from '../../shared/http/serve'
import { serveMetrics } from '../../shared/metrics/serve'
import { usage } from '../../shared/realtime/usage'
import { closeRedis } from '../../shared/redis/client'
import { startFunnelRefresher } from './analytics/funnel-refresher'
import { buildApiApp } from './app'

process.env.PROCESS_NAME ??= 'api'
// realtime_messages_publish counts its publishes as the public route does: written every REALTIME_USAGE_FLUSH_MS.
usage.start()
serveMetrics('api')
// Funnel insights that dashboards use are recomputed before their kept results go stale (one worker at a time).
const funnelRefresher = startFunnelRefresher()
serveApp({
  name: 'api',
  port: config.apiPort,
  app: buildApiApp(),
  maxRequestBodySize: config.apiBodyLimit * 2,
  logRequests: config.logRequests,
  onStop: async () => {
    await funnelRefresher.stop()
    await usage.stop()
    await sql.end({ timeout: 5 })
    await closeRedis()
  },
})
