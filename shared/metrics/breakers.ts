// The circuit breakers of PostgreSQL and Redis (shared/breaker.ts) as metrics, read at scrape time: whether one is
// open now, and how often one opened; and the backends' failures by kind (shared/backend-errors.ts). `backend` is
// `postgres` or `redis`, nothing else.
import { BACKEND_ERROR_KINDS, backendErrorCounts } from '../backend-errors'
import { breakerCounts } from '../breaker'
import { counter, gauge } from './registry'

const BACKENDS = ['postgres', 'redis']
const backendsOf = (counts: Map<string, number>) => new Set([...BACKENDS, ...counts.keys()])

let watching = false

/** Registers the two breaker metrics once; every process has both backends. */
export function watchBreakers(): void {
  if (watching) return
  watching = true
  gauge('breaker_open', 'Circuit breakers open now (calls refused between probes); on a Redis Cluster, one per node counts', ['backend'], function () {
    for (const backend of backendsOf(breakerCounts.open)) this.set({ backend }, breakerCounts.open.get(backend) ?? 0)
  })
  counter('breaker_opened_total', 'Circuit breaker openings (the backend became unreachable), each breaker its own: one outage counts once per pool and cluster node it reaches', ['backend'], function () {
    this.reset()
    for (const backend of backendsOf(breakerCounts.opened)) this.inc({ backend }, breakerCounts.opened.get(backend) ?? 0)
  })
  counter('backend_errors_total', 'PostgreSQL statements and Redis commands failed by the backend, by kind: timeout, unavailable (unreachable), other (it answered it cannot serve)', ['backend', 'kind'], function () {
    this.reset()
    for (const backend of BACKENDS) {
      for (const kind of BACKEND_ERROR_KINDS) this.inc({ backend, kind }, backendErrorCounts.get(`${backend}:${kind}`) ?? 0)
    }
  })
}
