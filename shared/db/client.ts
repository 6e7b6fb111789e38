// The process's one PostgreSQL pool. Values always go through tagged templates (postgres.js).
// Every statement and transaction is bounded (./deadline.ts): an unreachable or stalled server is a quick 503.
import postgres from 'postgres'
import { config } from '../config'
import { Breaker } from '../breaker'
import { withDeadlines } from './deadline'

export type Sql = postgres.Sql

/** How many servers a DATABASE_URL lists (`postgres://user@a:5432,b:5432/db`), read as postgres.js reads them. */
export function hostsIn(url: string): number {
  const authority = url.slice(url.indexOf('://') + 3).split(/[?/]/)[0] ?? ''
  return authority.slice(authority.indexOf('@') + 1).split(',').length
}

/**
 * postgres.js' connect_timeout, in seconds. The start-up after the TCP connect (TLS, authentication) may take all of
 * it, never less than the statement deadline: a slow but healthy server is waited for, not counted as down (the
 * statement waits its deadline; the connection serves the next). With several hosts the patched driver gives reaching
 * each host (the TCP connect alone) connect_timeout / hosts, the round's last host excepted: three quarters of the
 * deadline each (the start-up then has 1.5 deadlines or more), so a host that drops packets (a dead server's address)
 * costs that much and the next host is tried within the deadline, while a SYN lost and sent again after a second
 * still connects at the default deadline. One host: the deadline rounded up to a second.
 */
export const connectTimeoutSeconds = (timeoutMs: number, hosts: number): number =>
  hosts > 1 ? (hosts * 0.75 * timeoutMs) / 1000 : Math.max(1, Math.ceil(timeoutMs / 1000))

function pool(max = 10, connection: Record<string, string> = {}, url = config.databaseUrl): Sql {
  return postgres(url, {
    max,
    connection,
    idle_timeout: 30,
    connect_timeout: connectTimeoutSeconds(config.db.timeoutMs, hostsIn(url)),
    // Seconds between reconnect attempts (postgres.js grows its default to 20 s): come back within a second of the server.
    backoff: (attempt: number) => Math.min(0.05 * attempt, 0.5),
    onnotice: () => {},
    // uuid columns come back as strings; timestamps as Date, serialized to ISO-8601 by JSON.
  })
}

/** The shared pool, created on first use so that modules can import it without connecting. */
export const sql: Sql = withDeadlines(pool(), { timeoutMs: config.db.timeoutMs, coolDownMs: config.db.coolDownMs, name: 'main' })

/**
 * Every analytics query is planned for its own values. postgres.js prepares statements, and after five runs PostgreSQL
 * may switch a prepared statement to a generic plan that knows neither the product nor the events: in the benchmark
 * that turned a 1.5 s funnel into minutes on the sixth run.
 * No JIT: a rollup query's plan holds raw-event pieces that are estimated large and read nothing (the events past the
 * watermark, the hours a bucket boundary cuts), and compiling them took 650 ms of a 680 ms query in the benchmark.
 */
const ANALYTICS_SESSION = { plan_cache_mode: 'force_custom_plan', jit: 'off' }

/**
 * A small pool for analytics queries: their own, longer deadline (each also sets a statement_timeout), so that a heavy
 * query neither takes the main pool's connections nor is cut at the main pool's deadline.
 */
export const analyticsSql: Sql = withDeadlines(pool(4, ANALYTICS_SESSION), { timeoutMs: config.analytics.queryTimeoutMs + 2000, coolDownMs: config.db.coolDownMs, name: 'analytics' })

/**
 * The analytics pool's twin on the streaming replica (ANALYTICS_DATABASE_URL), or null when none is configured. Its
 * breaker is its own, labelled `postgres_replica` in the metrics: a replica that is down refuses at once between probes,
 * and analytics reads go to the primary meanwhile (services/api/analytics/reads.ts), so it is not a platform outage.
 */
export const analyticsReplicaSql: Sql | null = config.analytics.replicaUrl
  ? withDeadlines(pool(4, ANALYTICS_SESSION, config.analytics.replicaUrl),
    { timeoutMs: config.analytics.queryTimeoutMs + 2000, coolDownMs: config.db.coolDownMs, name: 'analytics_replica' },
    new Breaker('postgres_replica (analytics reads)', config.db.coolDownMs))
  : null

/**
 * A pool without deadlines, for scripts whose statements may legitimately run long (migrations, key rotation).
 * The caller ends it.
 */
export const unboundedSql = (): Sql => pool()
