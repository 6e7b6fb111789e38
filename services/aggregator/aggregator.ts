// The aggregator's loop: rollup rounds (the watermark forward, property sets and slots backfilled) back to back while there is
// work, and partition upkeep (months ahead, retention, an upgrade's legacy rows) on its own timer.
// docs/analytics.md, "Partitions" and "Rollups".
import { partitionStep, type PartitionPolicy } from '../../shared/analytics/partitions'
import { rollupStep, type RollupLimits } from '../../shared/analytics/rollups'
import type { Sql } from '../../shared/db/client'
import { describeError, log } from '../../shared/log'
import { wakeablePause } from '../../shared/wakeable-pause'

export interface AggregatorCounts {
  /** Event ids the watermark moved over. */
  rolledUp: number
  /** Property sets whose backfill finished. */
  setsReady: number
  partitionsMade: number
  partitionsDropped: number
  legacyMoved: number
  /** Rounds that failed (PostgreSQL unreachable, a lock not had in time): each is tried again. */
  failures: number
  /** The watermark after the last round. */
  watermark: number
}

export interface AggregatorSettings {
  idleMs: number
  /** How often partition upkeep runs while no legacy rows are left to move. */
  partitionEveryMs: number
  rollups: RollupLimits
  partitions: PartitionPolicy
}

export interface Aggregator {
  counts: AggregatorCounts
  /** Finishes the round in progress, then stops. */
  stop(): Promise<void>
}

export function startAggregator(sql: Sql, settings: AggregatorSettings, now = () => new Date()): Aggregator {
  const counts: AggregatorCounts = { rolledUp: 0, setsReady: 0, partitionsMade: 0, partitionsDropped: 0, legacyMoved: 0, failures: 0, watermark: 0 }
  let running = true
  const { pause, wake } = wakeablePause()
  let lastFailure = 0
  let partitionsDue = 0
  const failed = (what: string, error: unknown) => {
    counts.failures++
    // One line per outage, not per round.
    if (Date.now() - lastFailure > 5000) log('warn', `aggregator ${what} failed; tried again`, describeError(error))
    lastFailure = Date.now()
  }

  const loop = (async () => {
    while (running) {
      let busy = false
      if (Date.now() >= partitionsDue) {
        try {
          const done = await partitionStep(sql, now(), settings.partitions)
          counts.partitionsMade += done.made.length
          counts.partitionsDropped += done.dropped.length
          counts.legacyMoved += done.moved
          if (done.made.length || done.dropped.length) log('info', 'event partitions changed', { made: done.made, dropped: done.dropped })
          // Legacy rows left: the next batch in the next round.
          partitionsDue = done.moved ? 0 : Date.now() + settings.partitionEveryMs
          busy ||= done.moved > 0
        } catch (error) {
          failed('partition upkeep', error)
          partitionsDue = Date.now() + Math.min(settings.partitionEveryMs, 5000)
        }
      }
      try {
        const step = await rollupStep(sql, settings.rollups)
        counts.rolledUp += step.advanced
        counts.setsReady += step.ready
        counts.watermark = step.watermark
        busy ||= step.advanced > 0 || step.backfilled > 0 || step.slotsBackfilled > 0
      } catch (error) {
        failed('rollup round', error)
      }
      if (running && !busy) await pause(settings.idleMs)
    }
  })()

  return {
    counts,
    async stop() {
      running = false
      wake()
      await loop
    },
  }
}
