// The archiver's metrics (docs/metrics.md), read at scrape time from the counts its shard readers already keep
// (./shard-reader.ts ArchiverCounts): no line of the reading loop changes for them.
import { counterOf } from '../../shared/metrics/registry'
import type { ArchiverCounts } from './shard-reader'

/** The counts read when scraped: the archiver of this process (zeros until one is watched). */
let counts: ArchiverCounts = { read: 0, archived: 0, lost: 0, deadLettered: 0 }

counterOf('archiver_entries_read_total', 'Fan-out stream entries read by this archiver (archivable or not)', () => counts.read)
counterOf('archiver_entries_archived_total', 'Publications written to the archive (a redelivered entry already archived is not counted)', () => counts.archived)
counterOf('archiver_gap_entries_total', 'Entries trimmed from a stream before this archiver read them, or while pending: never archived', () => counts.lost)
counterOf('archiver_dead_lettered_entries_total', 'Entries PostgreSQL refused for their content, set aside in the shard\'s dead-letter list instead of archived', () => counts.deadLettered)

/** The counters read these counts from now on (declared once: a second call only swaps the source). */
export function watchArchiver(watched: ArchiverCounts): void {
  counts = watched
}
