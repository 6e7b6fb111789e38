// Archiver: `bun run services/archiver/main.ts`. Copies the stored publications of archiving namespaces from every
// shard's fan-out stream into PostgreSQL (consumer group `archiver`), and expires them. One is enough; more share the
// group (each with its own ARCHIVER_CONSUMER). docs/realtime-data-plane.md, "Archive".
import { listenForInvalidations } from '../../shared/cache/invalidation-listener'
import { sql } from '../../shared/db/client'
import { onShutdown } from '../../shared/http/lifecycle'
import { log } from '../../shared/log'
import { serveMetrics } from '../../shared/metrics/serve'
import { policyCache } from '../../shared/realtime/policies'
import { closeRedis } from '../../shared/redis/client'
import { startArchiver } from './archiver'
import { watchArchiver } from './metrics'

process.env.PROCESS_NAME ??= 'archiver'

// Policies are cached only while invalidations are heard: a namespace whose archive is removed stops being archived
// at once, not after a cache lifetime.
const listener = listenForInvalidations({
  caches: [policyCache],
  onMessage: (message) => {
    if (message.kind === 'namespaces') policyCache.forget(message.productId)
  },
})
const archiver = startArchiver()
// The archiver's only listener: it has no other port.
if (serveMetrics('archiver')) watchArchiver(archiver.counts)
log('info', 'archiver started', {})

onShutdown(async () => {
  await archiver.stop()
  await listener.stop()
  log('info', 'archiver stopped', { ...archiver.counts })
  await sql.end({ timeout: 5 }).catch(() => {})
  await closeRedis()
})
