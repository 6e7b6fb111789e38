// A value read at scrape time that costs a query (a count in PostgreSQL): kept a few seconds and read by one query at a
// time, so scrapes from several Prometheus servers, or a scraper retrying, never pile queries on the database.
import { config } from '../config'

/**
 * `read`, reused for `ttlMs` after it settles (a failure too: a database that does not answer is not asked again at
 * once), and shared while in flight: at most one call of `read` at a time.
 * @example const pending = cached(() => countPending()); gauge(..., async function () { this.set(await pending()) })
 */
export function cached<T>(read: () => Promise<T>, ttlMs = config.metrics.countCacheMs, now: () => number = Date.now): () => Promise<T> {
  let inFlight: Promise<T> | undefined
  let last: { at: number; value: Promise<T> } | undefined
  return () => {
    if (inFlight) return inFlight
    if (last && now() - last.at < ttlMs) return last.value
    const value = read()
    inFlight = value
    const settled = () => {
      last = { at: now(), value }
      inFlight = undefined
    }
    value.then(settled, settled)
    return value
  }
}
