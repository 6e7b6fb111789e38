// The PostgreSQL pools' and Redis connections' usage as metrics, read at scrape time: statements and commands handed to
// them and not answered yet, and whether each Redis connection is up. What the clients cannot tell (PostgreSQL
// connections open or idle: postgres.js keeps them to itself) is not exported; docs/metrics.md says so.
import { pendingStatements } from '../db/deadline'
import { redisUsage } from '../redis/usage'
import { gauge } from './registry'

let watching = false

/** Registers the pool gauges once (serveMetrics does, beside the breakers). */
export function watchPools(): void {
  if (watching) return
  watching = true
  gauge('db_statements_pending', 'PostgreSQL statements handed to a pool and not answered yet, by pool (main, analytics) and state: sent to a connection, or waiting for one', ['pool', 'state'], function () {
    this.reset()
    for (const [pool, { sent, waiting }] of pendingStatements()) {
      this.set({ pool, state: 'sent' }, sent)
      this.set({ pool, state: 'waiting' }, waiting)
    }
  })
  gauge('redis_commands_pending', 'Commands of the Redis command connection(s) not answered yet, by state: sent (awaiting the reply), queued (held until the connection is up)', ['state'], function () {
    const { commands } = redisUsage()
    this.set({ state: 'sent' }, commands.sent)
    this.set({ state: 'queued' }, commands.queued)
  })
  gauge('redis_connections', 'Redis connections this process holds, by role (command; dedicated: blocking readers, subscribers) and state (ready, not_ready)', ['role', 'state'], function () {
    this.reset()
    for (const role of ['command', 'dedicated']) for (const state of ['ready', 'not_ready']) this.set({ role, state }, 0)
    for (const { role, ready } of redisUsage().connections) this.inc({ role, state: ready ? 'ready' : 'not_ready' })
  })
}
