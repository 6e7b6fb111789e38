// The webhooks process's loop: claim due deliveries up to the free slots (WEBHOOK_CONCURRENCY), attempt each on its
// own (a slow receiver holds its slot, never the loop), claim again as slots free up; poll while idle. Stopping claims
// nothing more and waits for the attempts in flight, each bounded by WEBHOOK_TIMEOUT_MS, so their outcomes are recorded.
import { config } from '../../shared/config'
import { describeError, log } from '../../shared/log'
import { endpointSecrets } from '../../shared/webhooks/endpoints'
import { sendOutbound } from '../../shared/webhooks/outbound'
import { signedHeaders } from '../../shared/webhooks/signature'
import { serversResolve } from '../../shared/webhooks/url-policy'
import { webhookMetrics } from './metrics'
import {
  capPendingDeliveries, claimDue, type ClaimedDelivery, deleteOldMessages, describeResult, expireDisabledDeliveries,
  MAX_UNFINISHED_CLAIMS, recordAttempt, releaseClaims, unfinishedResult,
} from './queue'

/** Bytes of an answer read and kept (the attempt's excerpt); the rest is not waited for. */
export const RESPONSE_EXCERPT_BYTES = 1024

export interface Deliverer {
  /** Stops claiming and waits for the attempts in flight, at most `waitMs`. */
  stop(waitMs?: number): Promise<void>
}

const settings = () => config.webhooks
/** Hosts resolved as at create and update: through WEBHOOK_DNS_SERVERS when set. */
const resolve = serversResolve(config.webhooks.dnsServers, config.webhooks.dnsTimeoutMs)

/** One attempt: signed with every secret in force, sent, recorded. */
async function attempt(delivery: ClaimedDelivery): Promise<void> {
  if (delivery.unfinished >= MAX_UNFINISHED_CLAIMS) {
    // Its process stopped during each of the last attempts (killed, crashed, out of memory): not made again as is.
    const outcome = await recordAttempt(delivery, new Date(), unfinishedResult(delivery.unfinished), settings())
    log('warn', 'webhook attempt never completed; recorded as failed', { deliveryId: delivery.id, endpointId: delivery.endpointId, claims: delivery.unfinished, state: outcome?.state })
    return
  }
  const secrets = await endpointSecrets(delivery.endpointId)
  const attemptedAt = new Date()
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'platform-webhooks/1',
    ...signedHeaders(secrets, delivery.messageId, Math.floor(attemptedAt.getTime() / 1000), delivery.payload),
  }
  const result = await sendOutbound({
    url: delivery.url, headers, body: delivery.payload, timeoutMs: settings().timeoutMs,
    maxResponseBytes: RESPONSE_EXCERPT_BYTES, allowPrivate: settings().allowPrivateUrls, resolve,
  })
  webhookMetrics.attempt(result)
  const outcome = await recordAttempt(delivery, attemptedAt, result, settings())
  const fields = { deliveryId: delivery.id, messageId: delivery.messageId, endpointId: delivery.endpointId, attempt: delivery.attempts + 1, result: describeResult(result), ms: result.durationMs }
  // Why a host was refused, for the platform only: the attempt records one message for every such case.
  if (result.detail) log('info', 'webhook host refused', { ...fields, detail: result.detail })
  // The runtime's own words (address and port included) for operators; the attempt records the fixed ones.
  if (result.cause) log('info', 'webhook connection failed', { ...fields, cause: result.cause })
  if (!outcome) log('warn', 'webhook attempt made after its lease was taken over; not recorded', fields)
  else if (outcome.disabledReason) log('warn', 'webhook endpoint disabled', { ...fields, productId: delivery.productId, reason: outcome.disabledReason })
  else if (outcome.state === 'failed') log('info', 'webhook delivery failed: retries spent', fields)
}

/** How long a busy process waits for more slots to free up before claiming (see the loop). */
const CLAIM_GATHER_MS = 20

/** How often a webhooks process sweeps (WEBHOOK_RETENTION_DAYS, WEBHOOK_MAX_PENDING_PER_ENDPOINT). */
const SWEEP_EVERY_MS = 3_600_000

/** Repeats a batch step while a full batch went and the process runs; answers how many in all. */
async function drain(step: () => Promise<number>, isRunning: () => boolean, batch = 1000): Promise<number> {
  let total = 0
  for (let n = batch; isRunning() && n === batch;) total += n = await step()
  return total
}

/**
 * Keeps the outbox bounded: fails what waits for an endpoint disabled longer than the retention and the oldest
 * pending deliveries beyond WEBHOOK_MAX_PENDING_PER_ENDPOINT, then deletes what is past retention.
 */
async function sweep(isRunning: () => boolean): Promise<void> {
  const retentionMs = settings().retentionDays * 86_400_000
  try {
    const expired = await drain(() => expireDisabledDeliveries(retentionMs), isRunning)
    if (expired > 0) log('info', 'webhook deliveries of endpoints disabled past retention failed', { expired, retentionDays: settings().retentionDays })
    const capped = await drain(() => capPendingDeliveries(settings().maxPendingPerEndpoint), isRunning)
    if (capped > 0) log('warn', 'webhook deliveries over the pending cap failed, oldest first', { capped, cap: settings().maxPendingPerEndpoint })
    const deleted = await drain(() => deleteOldMessages(retentionMs), isRunning)
    if (deleted > 0) log('info', 'webhook messages past retention deleted', { deleted, retentionDays: settings().retentionDays })
  } catch (error) {
    log('warn', 'webhook retention sweep failed; tried again next time', describeError(error))
  }
}

/** Starts the loop. */
export function startDeliverer(): Deliverer {
  let running = true
  // The first sweep a minute after start (not with every restart of a crash loop at once), then hourly.
  let sweeper = setTimeout(function tick() {
    void sweep(() => running).finally(() => {
      if (running) sweeper = setTimeout(tick, SWEEP_EVERY_MS)
    })
  }, 60_000)
  let wake: (() => void) | undefined
  const inFlight = new Set<Promise<void>>()
  const loop = (async () => {
    while (running) {
      // A busy process (under a quarter of its slots free) lets a few slots free up before claiming: claims are
      // serialized across processes, so one claim per finished attempt would make the claim lock the bottleneck.
      if (inFlight.size > 0 && (settings().concurrency - inFlight.size) * 4 < settings().concurrency) await Bun.sleep(CLAIM_GATHER_MS)
      const free = settings().concurrency - inFlight.size
      let claimed = 0
      if (free > 0) {
        try {
          const batch = await claimDue({
            limit: free, leaseMs: settings().leaseMs, perEndpoint: settings().endpointConcurrency, perProduct: settings().productConcurrency,
            perOrganization: settings().organizationConcurrency,
          })
          if (!running) {
            await releaseClaims(batch).catch((error) => log('warn', 'webhook claims not released; their leases will run out', describeError(error)))
            break
          }
          claimed = batch.length
          for (const delivery of batch) {
            const task = attempt(delivery).catch((error) => {
              // Not recorded (the database went away, the endpoint deleted): the lease runs out and it is tried again.
              log('warn', 'webhook attempt not recorded; retried when its lease ends', { deliveryId: delivery.id, ...describeError(error) })
            }).finally(() => {
              inFlight.delete(task)
              wake?.()
            })
            inFlight.add(task)
          }
        } catch (error) {
          log('warn', 'webhook queue unavailable; retrying', describeError(error))
        }
      }
      // A full batch may mean more are due: claim again at once. Otherwise wait for the poll or for a slot to free up.
      if (running && (free <= 0 || claimed < free)) {
        await new Promise<void>((resolve) => {
          wake = resolve
          setTimeout(resolve, settings().pollMs)
        })
        wake = undefined
      }
    }
  })()
  log('info', 'webhooks deliverer started', {
    concurrency: settings().concurrency, perEndpoint: settings().endpointConcurrency, perProduct: settings().productConcurrency,
    perOrganization: settings().organizationConcurrency, timeoutMs: settings().timeoutMs, leaseMs: settings().leaseMs, retries: settings().retryDelaysMs.length,
  })
  return {
    async stop(waitMs = settings().timeoutMs + 5000) {
      running = false
      clearTimeout(sweeper)
      wake?.()
      let timer: ReturnType<typeof setTimeout> | undefined
      const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), waitMs)))
      const ended = await Promise.race([loop.then(() => Promise.all(inFlight)).then(() => 'done' as const), late])
      clearTimeout(timer)
      if (ended === 'late') log('warn', 'webhooks deliverer stopped waiting for attempts in flight; their leases run out and they are made again', { waitedMs: waitMs })
    },
  }
}
