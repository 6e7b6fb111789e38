// The planner's questions (./plan.ts PlanningDatabase) answered by PostgreSQL on the analytics pool.
import { readState } from '../../../../shared/analytics/rollups'
import { analyticsReplicaSql, analyticsSql } from '../../../../shared/db/client'
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
  /**
   * Read from the server whose watermark is the lowest, the replica when there is one: the query itself may run on
   * either, and the watermark it is planned with must not be above the one its statement reads (./rollup-path.ts).
   * A replica that cannot answer gives watermark 0 and no sets: right answers, from raw events.
   */
  async rollupState(productId) {
    if (!analyticsReplicaSql) return readState(analyticsSql, productId)
    // A server there that is no standby (promoted, say) is no lower bound of the primary's watermark: the primary's.
    const standby = await analyticsReplicaSql`select pg_is_in_recovery() as yes`.then(([row]) => row!.yes as boolean, () => null)
    if (standby === false) return readState(analyticsSql, productId)
    if (standby === null) return { watermark: 0, sets: [] }
    return readState(analyticsReplicaSql, productId).catch(() => ({ watermark: 0, sets: [] }))
  },
}
