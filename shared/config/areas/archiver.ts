// The archiver (services/archiver): fan-out streams into the Realtime archive.
import { hostname } from 'node:os'
import { area, integer, text } from '../variable'

export const archiver = area('Archiver',
  'The process that copies the fan-out streams into the Realtime archive in PostgreSQL. [Data plane](realtime-data-plane.md#archive).', {
    consumer: text('ARCHIVER_CONSUMER', {
      default: { value: () => `archiver-${hostname()}`, shown: 'archiver-<hostname>' },
      description: 'This archiver\'s consumer name in each shard\'s group `archiver`; stable across restarts, so it reads its own pending entries again.',
    }),
    batch: integer('ARCHIVER_BATCH', { default: 1000, min: 1, max: 100_000, description: 'Most entries read from one shard per round.' }),
    batchBytes: integer('ARCHIVER_BATCH_BYTES', {
      default: 4 * 1024 * 1024, min: 65_536, max: 67_108_864,
      description: 'Most payload bytes one INSERT carries (at least one row each).',
    }),
    idleMs: integer('ARCHIVER_IDLE_MS', { default: 200, min: 10, max: 60_000, description: 'Pause after a round that found nothing on any shard, in ms.' }),
    claimIdleMs: integer('ARCHIVER_CLAIM_IDLE_MS', {
      default: 30_000, min: 1000, max: 86_400_000,
      description: 'Entries pending this long (ms) with another consumer, one that died, are claimed.',
    }),
    sweepMs: integer('ARCHIVER_SWEEP_MS', {
      default: 3_600_000, min: 1000, max: 86_400_000,
      description: 'How often the sweeper deletes expired rows and drops and creates month partitions, in ms.',
    }),
    ackDelayMs: integer('ARCHIVER_ACK_DELAY_MS', {
      default: 0, min: 0, max: 60_000,
      description: 'Only for tests: a pause between a batch\'s commit and its acknowledgement, in ms.',
    }),
    sweepBatch: integer('ARCHIVER_SWEEP_BATCH', { default: 5000, min: 100, max: 1_000_000, description: 'Rows one sweeper DELETE removes.' }),
  })
