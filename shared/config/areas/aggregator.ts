// The aggregator (services/aggregator): event partitions and rollups.
import { area, integer } from '../variable'

export const aggregator = area('Aggregator',
  'The process that keeps event partitions ready and builds rollups. [Analytics](analytics.md#partitions).', {
    idleMs: integer('AGGREGATOR_IDLE_MS', { default: 1000, min: 10, max: 60_000, description: 'Pause between two rounds when the last found nothing to do, in ms.' }),
    chunkIds: integer('AGGREGATOR_CHUNK_IDS', {
      default: 200_000, min: 1000, max: 10_000_000,
      description: 'Most event ids one rollup step covers (one transaction).',
    }),
    lockTimeoutMs: integer('AGGREGATOR_LOCK_TIMEOUT_MS', {
      default: 1000, min: 10, max: 10_000,
      description: 'Longest a rollup step waits for captures in flight, and a partition change for its lock, in ms.',
    }),
    partitionsAhead: integer('ANALYTICS_PARTITIONS_AHEAD', { default: 3, min: 1, max: 24, description: 'Months of partitions kept ready ahead of the current one.' }),
    retentionMonths: integer('ANALYTICS_RETENTION_MONTHS', {
      default: 0, min: 0, max: 1200,
      description: 'Whole months of events kept before the current one; older partitions are dropped. 0: keep every event.',
    }),
    moveBatch: integer('AGGREGATOR_MOVE_BATCH', {
      default: 10_000, min: 100, max: 1_000_000,
      description: 'Events a legacy upgrade moves into the partitions per transaction.',
    }),
  })
