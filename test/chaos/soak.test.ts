// The kill-anything soak, shortened (scripts/chaos/soak.ts; the long run and its figures: docs/chaos.md): every platform process SIGKILLed at least once and started again while publishes with history, recovering
// subscribers, client events and presence, email sends, webhook deliveries, captures and dashboard reads run; then every
// invariant: acknowledged publications in history and the archive under their (epoch, offset), subscribers gapless or
// told to resync and caught up, accepted emails delivered under one Message-ID each, each webhook event received under
// one id, captured batches stored whole and counted once by the rollups, and no 5xx but 503.
import { expect, test } from 'bun:test'
import { runSoak } from '../../scripts/chaos/soak'

test('a soak that kills every process at least once breaks no invariant', async () => {
  const report = await runSoak({ seconds: 20, killEveryMs: 1000, subscribers: 4, log: (line) => console.error(line) })
  expect(report.violations).toEqual([])
  // The run did what it claims: each process killed, the load flowing through the kills.
  expect(Object.keys(report.kills).sort()).toEqual(Object.keys(report.memory).sort())
  expect(report.counts.publications).toBeGreaterThan(200)
  expect(report.counts.emails).toBeGreaterThan(20)
  expect(report.counts.batches).toBeGreaterThan(20)
  expect(report.counts.reconnects).toBeGreaterThan(0)
}, 180_000)
