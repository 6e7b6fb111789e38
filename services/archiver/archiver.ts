// The archiver's loop: every shard's fan-out stream read in rounds (./shard-reader.ts), and the sweeper (retention and
// month partitions, shared/realtime/archive.ts) on its own timer. docs/realtime-data-plane.md, "Archive".
import { config } from '../../shared/config'
import { ensurePartitionsAhead, sweepArchive } from '../../shared/realtime/archive'
import { describeError, log } from '../../shared/log'
import { ShardReader, type ArchiverCounts } from './shard-reader'
import { wakeablePause } from '../../shared/wakeable-pause'

export interface Archiver {
  counts: ArchiverCounts
  /** Finishes the round in progress (its batch committed and acknowledged, or left pending), then stops. */
  stop(): Promise<void>
}

export function startArchiver(options = config.archiver, shards = config.realtime.shards): Archiver {
  const counts: ArchiverCounts = { read: 0, archived: 0, lost: 0, deadLettered: 0 }
  const readers = Array.from({ length: shards }, (_, shard) => new ShardReader(shard, options, counts))
  let running = true
  const { pause, wake } = wakeablePause()
  let lastFailure = 0

  const loop = (async () => {
    while (running) {
      let found = 0
      let failed = false
      await Promise.all(readers.map(async (reader) => {
        try {
          const handled = await reader.round()
          found += handled
        } catch (error) {
          failed = true
          // One line per outage, not per shard and round: Redis or PostgreSQL down stops every shard alike.
          if (Date.now() - lastFailure > 5000) log('warn', 'archiver round failed; retrying', { shard: reader.shard, ...describeError(error) })
          lastFailure = Date.now()
        }
      }))
      if (running && found === 0) await pause(failed ? 1000 : options.idleMs)
    }
  })()

  let sweeping: Promise<void> = Promise.resolve()
  const sweep = () => {
    sweeping = (async () => {
      try {
        const made = await ensurePartitionsAhead()
        if (made.length) log('info', 'archive partitions created', { partitions: made })
      } catch (error) {
        // Most often its lock not had within PARTITION_DDL_LOCK_TIMEOUT: two months ahead leave time for the next sweep.
        log('warn', 'archive partitions not created; tried again at the next sweep', describeError(error))
      }
      try {
        const result = await sweepArchive({ batch: options.sweepBatch })
        if (result.deleted || result.dropped.length || result.postponed.length) log('info', 'archive swept', { ...result })
      } catch (error) {
        log('warn', 'archive sweep failed; tried again at the next', describeError(error))
      }
    })()
  }
  sweep()
  const sweeper = setInterval(sweep, options.sweepMs)
  const progress = setInterval(() => log('info', 'archiver progress', { ...counts }), 60_000)

  return {
    counts,
    async stop() {
      running = false
      clearInterval(sweeper)
      clearInterval(progress)
      wake()
      await loop
      await sweeping
    },
  }
}
