// Platform API worker: `bun run services/api/main.ts`. Several workers share API_PORT (reusePort).
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { serveApp } from '../../shared/http/serve'
import { serveMetrics } from '../../shared/metrics/serve'
import { closeRedis } from '../../shared/redis'
import { buildApiApp } from './app'

process.env.PROCESS_NAME ??= 'api'
serveMetrics('api')
serveApp({
  name: 'api',
  port: config.apiPort,
  app: buildApiApp(),
  maxRequestBodySize: config.apiBodyLimit * 2,
  logRequests: config.logRequests,
  onStop: async () => {
    await sql.end({ timeout: 5 })
    await closeRedis()
  },
})
