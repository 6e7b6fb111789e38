// WebSocket gateway: `bun run gateway/main.ts`. Several gateways share GATEWAY_PORT (reusePort); any serves any client.
import { config } from '../shared/config'
import { sql } from '../shared/db/client'
import { onShutdown } from '../shared/http/lifecycle'
import { serveMetrics } from '../shared/metrics/serve'
import { usage } from '../shared/realtime/usage'
import { closeRedis } from '../shared/redis/client'
import { requireSecretKey } from '../shared/secrets'
import { startGateway } from './node'

process.env.PROCESS_NAME ??= 'gateway'
requireSecretKey() // token signing keys are sealed: without the master key, fail now with a clear message

serveMetrics('gateway')
const gateway = startGateway(config.gatewayPort)
usage.start()

onShutdown(async () => {
  await gateway.drain()
  await usage.stop()
  await sql.end({ timeout: 5 }).catch(() => {})
  await closeRedis()
})
