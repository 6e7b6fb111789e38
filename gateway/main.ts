// WebSocket gateway: `bun run gateway/main.ts`. Several gateways share GATEWAY_PORT (reusePort); any serves any client.
import { config } from '../shared/config'
import { sql } from '../shared/db/client'
import { describeError, log } from '../shared/log'
import { closeRedis } from '../shared/redis'
import { requireSecretKey } from '../shared/secrets'
import { startGateway } from './node'

process.env.PROCESS_NAME ??= 'gateway'
requireSecretKey() // token signing keys are sealed: without the master key, fail now with a clear message

const gateway = startGateway(config.gatewayPort)

process.on('unhandledRejection', (error) => log('error', 'unhandled rejection', describeError(error)))
let stopping = false
const stop = async (signal: string) => {
  if (stopping) return
  stopping = true
  log('info', 'shutting down', { signal })
  await gateway.drain()
  await sql.end({ timeout: 5 }).catch(() => {})
  await closeRedis()
  process.exit(0)
}
process.on('SIGTERM', () => void stop('SIGTERM'))
process.on('SIGINT', () => void stop('SIGINT'))
