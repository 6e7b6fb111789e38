// Aggregator: `bun run services/aggregator/main.ts`. Keeps tracked events' monthly partitions and their rollups
// current (docs/analytics.md, "Partitions" and "Rollups"). One is enough; a second waits on the first's locks and
// shares the work safely (every step is one transaction guarded by row locks).
import { config } from '../../shared/config'
import { unboundedSql } from '../../shared/db/client'
import { onShutdown } from '../../shared/http/lifecycle'
import { log } from '../../shared/log'
import { serveMetrics } from '../../shared/metrics/serve'
import { startAggregator } from './aggregator'
import { watchAggregator } from './metrics'

process.env.PROCESS_NAME ??= 'aggregator'

// Its own pool without the API's statement deadline: a rollup step over a chunk of ids may take longer than a request.
const sql = unboundedSql()
const { aggregator: settings, analytics } = config
const aggregator = startAggregator(sql, {
  idleMs: settings.idleMs,
  partitionEveryMs: 60_000,
  rollups: { chunkIds: settings.chunkIds, lockTimeoutMs: settings.lockTimeoutMs, maxValues: analytics.rollupMaxValues, maxSets: analytics.maxRollupSets },
  partitions: { ahead: settings.partitionsAhead, retentionMonths: settings.retentionMonths, moveBatch: settings.moveBatch, lockTimeoutMs: settings.lockTimeoutMs },
})
// The aggregator's only listener: it has no other port.
if (serveMetrics('aggregator')) watchAggregator(aggregator.counts)
log('info', 'aggregator started', {})

onShutdown(async () => {
  await aggregator.stop()
  log('info', 'aggregator stopped', { ...aggregator.counts })
  await sql.end({ timeout: 5 }).catch(() => {})
})
