// The aggregator's metrics (docs/metrics.md), read at scrape time from the counts its loop keeps (./aggregator.ts).
import { counterOf, gauge } from '../../shared/metrics/registry'
import type { AggregatorCounts } from './aggregator'

let counts: AggregatorCounts = { rolledUp: 0, setsReady: 0, partitionsMade: 0, partitionsDropped: 0, legacyMoved: 0, failures: 0, watermark: 0 }

counterOf('aggregator_events_rolled_up_total', 'Event ids the rollups\' watermark moved over', () => counts.rolledUp)
counterOf('aggregator_sets_ready_total', 'Rollup property sets whose backfill finished', () => counts.setsReady)
counterOf('aggregator_partitions_created_total', 'Monthly event partitions created', () => counts.partitionsMade)
counterOf('aggregator_partitions_dropped_total', 'Monthly event partitions dropped by retention', () => counts.partitionsDropped)
counterOf('aggregator_legacy_events_moved_total', 'Events of an upgraded deployment moved into the partitions', () => counts.legacyMoved)
counterOf('aggregator_round_failures_total', 'Aggregator rounds that failed and were tried again', () => counts.failures)
gauge('aggregator_watermark', 'The last event id every rollup counts', [], function () {
  this.set(counts.watermark)
})

/** The metrics read these counts from now on. */
export function watchAggregator(watched: AggregatorCounts): void {
  counts = watched
}
