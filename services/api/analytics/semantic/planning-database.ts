// The planner's questions (./plan.ts PlanningDatabase) answered by PostgreSQL on the analytics pool.
import { readState } from '../../../../shared/analytics/rollups'
import { analyticsSql } from '../../../../shared/db/client'
import type { PlanningDatabase } from './plan'

let zones: Set<string> | undefined

export const postgresPlanning: PlanningDatabase = {
  /** Read once per process: the zones a server knows do not change while it runs. */
  async timezones() {
    zones ??= new Set((await analyticsSql`select name from pg_timezone_names`).map((r) => r.name as string))
    return zones
  },
  async bucketStartMs(from, bucket, timezone) {
    const start = bucket === 'hour' ? `date_trunc('hour', $1::timestamptz, $2)` : `(date_trunc('${bucket}', $1::timestamptz at time zone $2) at time zone $2)`
    const [row] = await analyticsSql.unsafe(`select extract(epoch from ${start}) * 1000 as ms`, [from.toISOString(), timezone])
    return Number(row!.ms)
  },
  rollupState: (productId) => readState(analyticsSql, productId),
}
