// The delivery queue is the webhook_deliveries table. A process claims due deliveries with a lease, fairly (at most so
// many in flight per endpoint, per product and per organization, across every process; the least busy first), and
// records each attempt only while its lease stands. A process that dies leaves its deliveries leased; when the lease
// runs out another claims them again: nothing is lost, and an attempt whose outcome was not recorded is made again
// with the same webhook-id (at least once).
import { sql } from '../../shared/db/client'
import type { OutboundResult } from '../../shared/webhooks/outbound'
import { nextRetryDelay } from '../../shared/webhooks/schedule'

/** Serializes claims across processes (held for one short statement), so in-flight counts are exact, not racy. */
const CLAIM_LOCK = 727_022

export interface ClaimedDelivery {
  id: string
  messageId: string
  endpointId: string
  productId: string
  url: string
  /** The body, as stored: the same bytes on every attempt. */
  payload: string
  /** Attempts recorded before this one. */
  attempts: number
  /** Claims since the last recorded attempt before this one: attempts whose process stopped before recording them. */
  unfinished: number
  leaseToken: string
}

export interface ClaimBounds {
  limit: number
  leaseMs: number
  perEndpoint: number
  perProduct: number
  perOrganization: number
}

/**
 * Claims up to `limit` due deliveries of enabled endpoints, keeping at most `perEndpoint` leased per endpoint,
 * `perProduct` per product and `perOrganization` per organization (those already leased by any process count), so that
 * one slow or hostile receiver, product or organization holds a share of the slots, never all of them. Free slots go
 * to the least busy first: the organization with the fewest in flight, then the product, then the endpoint, then the
 * oldest due; so a tenant with a deep backlog takes turns with the others instead of taking every slot that frees up.
 * Only endpoints with pending deliveries are visited, and each one's due deliveries are read from its own index range
 * (webhook_deliveries_due), so neither many idle endpoints nor a deep backlog on one endpoint makes the claim slower.
 * Candidates are read without row locks (claims are serialized by CLAIM_LOCK; the update checks each row is still
 * pending and unleased), so a claim locks only the rows it takes.
 */
export async function claimDue(bounds: ClaimBounds): Promise<ClaimedDelivery[]> {
  if (bounds.limit <= 0) return []
  const rows = await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${CLAIM_LOCK})`
    return tx`
      with recursive pending_endpoints as (
        -- Every endpoint with a pending delivery, by a skip scan of webhook_deliveries_due: one index descent per such
        -- endpoint, however deep its backlog, and none for the endpoints with nothing pending (most, most of the time).
        (select endpoint_id from webhook_deliveries where state = 'pending' order by endpoint_id limit 1)
        union all
        select (select d.endpoint_id from webhook_deliveries d where d.state = 'pending' and d.endpoint_id > p.endpoint_id order by d.endpoint_id limit 1)
        from pending_endpoints p where p.endpoint_id is not null
      ),
      leased as (
        select l.endpoint_id, l.n, e.product_id, pr.organization_id
        from (
          select endpoint_id, count(*)::int as n from webhook_deliveries
          where state = 'pending' and locked_until > now() group by endpoint_id
        ) as l
        join webhook_endpoints e on e.id = l.endpoint_id join products pr on pr.id = e.product_id
      ),
      product_leased as (select product_id, sum(n)::int as n from leased group by product_id),
      organization_leased as (select organization_id, sum(n)::int as n from leased group by organization_id),
      candidates as (
        select due.id, due.next_attempt_at, e.product_id, pr.organization_id, coalesce(leased.n, 0) + due.k as endpoint_load
        from pending_endpoints p
        join webhook_endpoints e on e.id = p.endpoint_id
        join products pr on pr.id = e.product_id
        left join leased on leased.endpoint_id = e.id
        cross join lateral (
          -- k: its rank among the endpoint's due deliveries (read in index order, so no sort).
          select d.id, d.next_attempt_at, row_number() over (order by d.next_attempt_at) as k from webhook_deliveries d
          where d.endpoint_id = e.id and d.state = 'pending' and d.next_attempt_at <= now()
            and (d.locked_until is null or d.locked_until <= now())
          order by d.next_attempt_at
          limit greatest(${bounds.perEndpoint} - coalesce(leased.n, 0), 0)
        ) as due
        where e.enabled
      ),
      -- Each candidate's load: how many would be in flight to its endpoint, product and organization once it and the
      -- ones ranked before it are taken. Ranking by load first takes turns between tenants.
      by_product as (
        select c.*, coalesce(pl.n, 0)
          + row_number() over (partition by c.product_id order by c.endpoint_load, c.next_attempt_at, c.id) as product_load
        from candidates c left join product_leased pl on pl.product_id = c.product_id
      ),
      by_organization as (
        select b.*, coalesce(ol.n, 0)
          + row_number() over (partition by b.organization_id order by b.product_load, b.endpoint_load, b.next_attempt_at, b.id) as organization_load
        from by_product b left join organization_leased ol on ol.organization_id = b.organization_id
        where b.product_load <= ${bounds.perProduct}
      ),
      picked as (
        select id from by_organization
        where organization_load <= ${bounds.perOrganization}
        order by organization_load, product_load, endpoint_load, next_attempt_at, id
        limit ${bounds.limit}
      )
      update webhook_deliveries d
      set locked_until = now() + ${bounds.leaseMs} * interval '1 millisecond', lease_token = gen_random_uuid(), claims = d.claims + 1
      from picked, webhook_messages m, webhook_endpoints e
      where d.id = picked.id and m.id = d.message_id and e.id = d.endpoint_id
        and d.state = 'pending' and (d.locked_until is null or d.locked_until <= now())
      returning d.id, d.message_id, d.endpoint_id, e.product_id, e.url, m.payload, d.attempts, d.claims, d.lease_token`
  })
  return rows.map((row) => ({
    id: row.id, messageId: row.message_id, endpointId: row.endpoint_id, productId: row.product_id, url: row.url,
    payload: row.payload, attempts: row.attempts, unfinished: row.claims - 1, leaseToken: row.lease_token,
  }))
}

/** Gives back claims never attempted (the process stopped meanwhile): the next claim takes them at once. */
export async function releaseClaims(deliveries: ClaimedDelivery[]): Promise<void> {
  if (deliveries.length === 0) return
  await sql`
    update webhook_deliveries d set locked_until = null, lease_token = null, claims = greatest(d.claims - 1, 0)
    from unnest(${deliveries.map((d) => d.id)}::uuid[], ${deliveries.map((d) => d.leaseToken)}::uuid[]) as claimed(id, token)
    where d.id = claimed.id and d.lease_token = claimed.token`
}

export interface AttemptPolicy {
  /** The delays between attempts (WEBHOOK_RETRY_SCHEDULE). */
  retryDelaysMs: readonly number[]
  /** Failing this long without a success disables the endpoint (WEBHOOK_DISABLE_AFTER_MS). */
  disableAfterMs: number
}

export interface AttemptOutcome {
  state: 'succeeded' | 'pending' | 'failed'
  /** When pending: the delay before the next attempt. */
  retryInMs?: number
  /** Set when this attempt disabled the endpoint: why (as the product reads it in disabledReason). */
  disabledReason?: string
}

/**
 * Claims of one delivery without a recorded attempt after which the next claim records a failed attempt instead of
 * making it: an attempt that stops its process every time (a poison delivery) then runs out its schedule.
 */
export const MAX_UNFINISHED_CLAIMS = 3

/** The attempt recorded, not made, for a delivery claimed MAX_UNFINISHED_CLAIMS times without an outcome. */
export const unfinishedResult = (times: number): OutboundResult => ({
  status: null, durationMs: 0, excerpt: '', error: `not completed: the process stopped during the attempt ${times} times`,
})

/** Text columns refuse NUL; an answer may carry any bytes. */
const text = (value: string, maxBytes: number) => {
  const clean = value.replaceAll('\u0000', '\uFFFD')
  return Buffer.byteLength(clean) <= maxBytes ? clean : Buffer.from(clean).subarray(0, maxBytes).toString('utf8').replace(/\uFFFD$/, '')
}

/** What an attempt's result was, in a few words (for disabledReason and the logs). */
export const describeResult = (result: OutboundResult) =>
  result.status === null ? result.error ?? 'no answer' : `HTTP ${result.status}${result.error ? ` (${result.error})` : ''}`

/**
 * A 2xx, judged by its status alone (as Svix does): the receiver said it has the event, whatever its body does after
 * (closes early, stalls past the timeout: that is recorded in the attempt's error, and not retried).
 */
export const succeeded = (result: OutboundResult) => result.status !== null && result.status >= 200 && result.status < 300

/**
 * Records one attempt and what follows from it, in one transaction, and releases the lease: success; 410 Gone (the
 * endpoint is disabled at once, the delivery failed); otherwise a retry after the schedule's next delay, or failed when
 * the schedule is spent. A failure also starts or continues the endpoint's failing streak, and a streak longer than
 * `disableAfterMs` disables it. Null (nothing written) when the lease is no longer this process's.
 */
export async function recordAttempt(
  delivery: ClaimedDelivery, attemptedAt: Date, result: OutboundResult, policy: AttemptPolicy,
): Promise<AttemptOutcome | null> {
  return sql.begin(async (tx) => {
    const [held] = await tx`select id from webhook_deliveries where id = ${delivery.id} and lease_token = ${delivery.leaseToken} for update`
    if (!held) return null
    await tx`
      insert into webhook_attempts (delivery_id, attempted_at, duration_ms, status_code, error, response_excerpt)
      values (${delivery.id}, ${attemptedAt}, ${result.durationMs}, ${result.status}, ${result.error ? text(result.error, 2048) : null},
        ${text(result.excerpt, 4096)})`
    const made = delivery.attempts + 1
    const gone = result.status === 410
    const retryInMs = succeeded(result) || gone ? null : nextRetryDelay(made, policy.retryDelaysMs)
    const outcome: AttemptOutcome = succeeded(result)
      ? { state: 'succeeded' } : retryInMs !== null ? { state: 'pending', retryInMs } : { state: 'failed' }
    await tx`
      update webhook_deliveries set attempts = ${made}, state = ${outcome.state}, locked_until = null, lease_token = null, claims = 0,
        next_attempt_at = ${retryInMs !== null ? sql`now() + ${retryInMs} * interval '1 millisecond'` : sql`next_attempt_at`},
        updated_at = now()
      where id = ${delivery.id}`
    if (outcome.state === 'succeeded') {
      await tx`update webhook_endpoints set failing_since = null where id = ${delivery.endpointId} and failing_since is not null`
      return outcome
    }
    const [endpoint] = await tx`
      update webhook_endpoints set failing_since = coalesce(failing_since, ${attemptedAt})
      where id = ${delivery.endpointId}
      returning enabled, failing_since, failing_since <= now() - ${policy.disableAfterMs} * interval '1 millisecond' as overdue`
    if (!endpoint?.enabled) return outcome
    const reason = gone
      ? `The endpoint answered 410 Gone at ${attemptedAt.toISOString()}: disabled at once. Enable it again to resume deliveries.`
      : endpoint.overdue
        ? `Every attempt since ${(endpoint.failing_since as Date).toISOString()} failed (the last: ${text(describeResult(result), 300)}): `
          + `disabled after ${formatSpan(policy.disableAfterMs)} of failures. Enable it again to resume deliveries.`
        : null
    if (reason) {
      await tx`update webhook_endpoints set enabled = false, disabled_reason = ${reason}, updated_at = now() where id = ${delivery.endpointId}`
      outcome.disabledReason = reason
    }
    return outcome
  })
}

/** 432000000 -> "5 days", 7200000 -> "2 h"; other spans (the tests') in seconds. */
function formatSpan(ms: number): string {
  const days = ms / 86_400_000
  if (Number.isInteger(days)) return `${days} day${days === 1 ? '' : 's'}`
  return Number.isInteger(ms / 3_600_000) ? `${ms / 3_600_000} h` : `${ms / 1000} s`
}

/**
 * Deletes up to `batch` messages older than `retentionMs` none of whose deliveries is pending (their deliveries and
 * attempts go with them). Answers how many; the caller repeats while a full batch went. Rows another process is
 * deleting are skipped, so processes sweeping at once do not wait on each other.
 */
export async function deleteOldMessages(retentionMs: number, batch = 1000): Promise<number> {
  const rows = await sql`
    delete from webhook_messages where id in (
      select m.id from webhook_messages m
      where m.created_at < now() - ${retentionMs} * interval '1 millisecond'
        and not exists (select 1 from webhook_deliveries d where d.message_id = m.id and d.state = 'pending')
      limit ${batch}
      for update skip locked
    )
    returning id`
  return rows.length
}

/** Why a delivery failed without its attempts being made: recorded as its last attempt, so the product sees it. */
export const EXPIRED_DISABLED = 'not attempted: the endpoint stayed disabled longer than the retention'
export const capReason = (cap: number) => `not attempted: more than ${cap} deliveries were pending to the endpoint; the oldest were failed`

/**
 * Fails up to `batch` pending deliveries of endpoints disabled (and left unchanged) for longer than `retentionMs`, each
 * with an attempt saying so: what waits for an endpoint nobody enables again does not wait for ever. Answers how many.
 */
export async function expireDisabledDeliveries(retentionMs: number, batch = 1000): Promise<number> {
  const rows = await sql`
    with expired as (
      update webhook_deliveries set state = 'failed', locked_until = null, lease_token = null, updated_at = now()
      where id in (
        select d.id from webhook_endpoints e join webhook_deliveries d on d.endpoint_id = e.id and d.state = 'pending'
        where not e.enabled and e.updated_at < now() - ${retentionMs} * interval '1 millisecond'
          and (d.locked_until is null or d.locked_until <= now())
        limit ${batch}
        for update of d skip locked
      )
      returning id
    )
    insert into webhook_attempts (delivery_id, attempted_at, duration_ms, error)
    select id, now(), 0, ${EXPIRED_DISABLED} from expired
    returning 1`
  return rows.length
}

/**
 * Fails up to `batch` of the oldest pending deliveries of each endpoint holding more than `cap` pending, each with an
 * attempt saying so (they stay listed and can be replayed): one tenant's outbox does not grow without bound behind a
 * receiver that is down. Answers how many.
 */
export async function capPendingDeliveries(cap: number, batch = 1000): Promise<number> {
  const rows = await sql`
    with crowded as (
      select endpoint_id from webhook_deliveries where state = 'pending' group by endpoint_id having count(*) > ${cap}
    ),
    over as (
      select over.id from crowded cross join lateral (
        select d.id from webhook_deliveries d
        where d.endpoint_id = crowded.endpoint_id and d.state = 'pending'
        order by d.created_at desc, d.id desc
        offset ${cap}
      ) as over
      limit ${batch}
    ),
    failed as (
      update webhook_deliveries d set state = 'failed', locked_until = null, lease_token = null, updated_at = now()
      from over where d.id = over.id and d.state = 'pending' and (d.locked_until is null or d.locked_until <= now())
      returning d.id
    )
    insert into webhook_attempts (delivery_id, attempted_at, duration_ms, error)
    select id, now(), 0, ${capReason(cap)} from failed
    returning 1`
  return rows.length
}
