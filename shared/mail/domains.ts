// Sending domains: registered with a fresh DKIM key pair, checked against DNS, and only then allowed to send.
import { config } from '../config'
import { randomBytes } from 'node:crypto'
import { type PageRequest, PAGE_DEFAULT } from '../catalog/pagination'
import { checkCeiling, precheckCeiling } from '../db/ceiling'
import { sql } from '../db/client'
import { keysetPage, NEWEST_FIRST } from '../db/keyset'
import { aadOf } from '../db/seal-secrets'
import { conflict, notFound } from '../errors'
import { dkimRecordValue, newDkimKeys } from './dkim'
import { lookupTxt } from './dns'
import { isUuid } from '../ids'
import { publishInvalidation } from '../cache/invalidation'
import { seal } from '../secrets'
import { recordEvent } from '../webhooks/outbox'
import { isPgError } from '../db/error-codes'

export type DomainStatus = 'pending' | 'verified' | 'failed'
export type RecordStatus = 'pending' | 'verified' | 'failed'
type RecordName = 'dkim' | 'spf' | 'ownership'

export interface DnsRecord {
  record: 'DKIM' | 'SPF' | 'Ownership'
  type: 'TXT'
  /** The full name to publish the record at. */
  name: string
  value: string
  status: RecordStatus
}

export interface Domain {
  id: string
  name: string
  status: DomainStatus
  records: DnsRecord[]
  createdAt: Date
  checkedAt: Date | null
  verifiedAt: Date | null
}

/** Where the ownership record goes: its own name, so it never collides with the apex's SPF or site verification records. */
export const ownershipName = (domain: string) => `_platform-verification.${domain}`
const spfValue = () => `v=spf1 include:${config.mail.spfInclude} ~all`

const COLUMNS = sql`id, name, status, dkim_selector, dkim_public_key, verification_token, record_status, created_at, checked_at, verified_at`

function domainOut(row: Record<string, any>): Domain {
  const status = row.record_status as Record<RecordName, RecordStatus>
  return {
    id: row.id, name: row.name, status: row.status,
    records: [
      { record: 'DKIM', type: 'TXT', name: `${row.dkim_selector}._domainkey.${row.name}`, value: dkimRecordValue(row.dkim_public_key), status: status.dkim },
      { record: 'SPF', type: 'TXT', name: row.name, value: spfValue(), status: status.spf },
      { record: 'Ownership', type: 'TXT', name: ownershipName(row.name), value: `platform-verification=${row.verification_token}`, status: status.ownership },
    ],
    createdAt: row.created_at, checkedAt: row.checked_at, verifiedAt: row.verified_at,
  }
}

/**
 * Registers a domain: a new RSA 2048 DKIM pair (the private key sealed, never returned) and the records to publish.
 * With MAIL_DEV_VERIFY it is verified at once (no DNS); otherwise it is `pending` until a check finds every record.
 */
export async function createDomain(productId: string, name: string): Promise<Domain> {
  const count = (q: typeof sql) => q<{ n: number }[]>`select count(*)::int as n from mail_domains where product_id = ${productId}`
  await precheckCeiling('mailDomains', count) // before the key pair, which is the costly part
  const keys = await newDkimKeys()
  const verified = config.mail.devVerify
  const recordStatus = verified ? { dkim: 'verified', spf: 'verified', ownership: 'verified' } : { dkim: 'pending', spf: 'pending', ownership: 'pending' }
  try {
    return await sql.begin(async (tx) => {
      await checkCeiling(tx, productId, 'mailDomains', count)
      const [row] = await tx`
        insert into mail_domains (product_id, name, status, dkim_selector, dkim_public_key, secret_sealed, verification_token, record_status, verified_at)
        values (${productId}, ${name}, ${verified ? 'verified' : 'pending'}, ${config.mail.dkimSelector}, ${keys.publicKey},
                ${Buffer.alloc(0)}, ${randomBytes(24).toString('base64url')}, ${recordStatus as never}::jsonb, ${verified ? sql`now()` : null})
        returning ${COLUMNS}`
      // Sealed with the row's id in its associated data: a sealed key copied to another domain does not open.
      await tx`update mail_domains set secret_sealed = ${seal(Buffer.from(keys.privateKeyPem), aadOf('mail_domains', row!.id))} where id = ${row!.id}`
      return domainOut(row!)
    })
  } catch (error) {
    if (isPgError(error, 'uniqueViolation')) {
      throw conflict(`Domain ${name} is already registered for this product`, [{ path: '/body/name', message: 'is already registered' }])
    }
    throw error
  }
}

/** Newest first; at most `page.limit + 1` rows (the extra one says more follow). */
export async function listDomains(productId: string, page: PageRequest = { limit: PAGE_DEFAULT }): Promise<Domain[]> {
  const rows = await keysetPage({
    what: 'domain', order: NEWEST_FIRST,
    cursor: (after) => sql`from mail_domains where id = ${after} and product_id = ${productId}`,
    rows: sql`select ${COLUMNS} from mail_domains where product_id = ${productId}`,
  }, page)
  return rows.map(domainOut)
}

/** One domain of the product; another product's, an unknown id and a malformed id are all 404. */
export async function getDomain(productId: string, id: string): Promise<Domain> {
  if (!isUuid(id)) throw notFound('Domain')
  const [row] = await sql`select ${COLUMNS} from mail_domains where id = ${id} and product_id = ${productId}`
  if (!row) throw notFound('Domain')
  return domainOut(row)
}

/**
 * Every run of consecutive strings of a TXT answer, joined. A long record is several strings, and Bun's resolver may
 * hand them back as separate records (docs/mail.md): a value is found when some run of them joins into it.
 */
function joinedRuns(values: string[], maxLength: number): string[] {
  // Bounded: a domain owner controls the answer, and every run of thousands of records would be quadratic work.
  const records = values.slice(0, MAX_TXT_RECORDS)
  const runs: string[] = []
  for (let start = 0; start < records.length; start++) {
    let joined = ''
    for (let end = start; end < records.length && joined.length <= maxLength; end++) runs.push((joined += records[end]))
  }
  return runs
}
/** TXT records of one name looked at in a check, and the longest SPF record considered (RFC 7208 keeps them short). */
const MAX_TXT_RECORDS = 50
const MAX_SPF_LENGTH = 4096

/** What a check of the three records found. Pure: the DNS answers in, the statuses out. */
export function checkRecords(domain: Domain, answers: Record<RecordName, string[]>): Record<RecordName, RecordStatus> {
  const normalized = (value: string) => value.replace(/\s+/g, '').toLowerCase()
  const [dkim, , ownership] = domain.records
  const found = (values: string[], expected: string) => joinedRuns(values, 2 * expected.length + 256).some((v) => normalized(v) === normalized(expected))
  const include = `include:${config.mail.spfInclude}`.toLowerCase()
  const spf = joinedRuns(answers.spf, MAX_SPF_LENGTH).some((v) => /^v=spf1\b/i.test(v.trim())
    && v.trim().split(/\s+/).some((term) => term.replace(/^[+?~-]/, '').toLowerCase() === include))
  return {
    dkim: found(answers.dkim, dkim!.value) ? 'verified' : 'failed',
    spf: spf ? 'verified' : 'failed',
    ownership: found(answers.ownership, ownership!.value) ? 'verified' : 'failed',
  }
}

/**
 * Looks the records up and moves the domain to `verified` (all three found) or `failed` (any missing; verify again
 * once they are published). A verified domain whose records have gone is `failed` after its next check, and stops
 * sending. With MAIL_DEV_VERIFY the domain is verified without DNS.
 */
export async function verifyDomain(productId: string, id: string): Promise<Domain> {
  const domain = await getDomain(productId, id)
  let statuses: Record<RecordName, RecordStatus>
  if (config.mail.devVerify) statuses = { dkim: 'verified', spf: 'verified', ownership: 'verified' }
  else {
    const [dkim, spf, ownership] = await Promise.all(domain.records.map((r) => lookupTxt(r.name)))
    statuses = checkRecords(domain, { dkim: dkim!, spf: spf!, ownership: ownership! })
  }
  const verified = Object.values(statuses).every((s) => s === 'verified')
  return sql.begin(async (tx) => {
    const [before] = await tx`select status from mail_domains where id = ${id} and product_id = ${productId} for update`
    const [row] = await tx`
      update mail_domains set record_status = ${statuses as never}::jsonb, status = ${verified ? 'verified' : 'failed'}, checked_at = now(),
        verified_at = case when ${verified} then coalesce(verified_at, now()) else null end
      where id = ${id} and product_id = ${productId}
      returning ${COLUMNS}`
    if (!before || !row) throw notFound('Domain')
    const after = domainOut(row)
    // A check that changes nothing is no event: only a change of the domain's status is.
    if (before.status !== after.status) {
      await recordEvent(tx, {
        productId, area: 'mail', kind: 'domain.verification_changed',
        data: {
          domainId: after.id, name: after.name, status: after.status, previousStatus: before.status,
          records: after.records.map((r) => ({ record: r.record, status: r.status })),
        },
      })
    }
    return after
  })
}

/**
 * Deletes a domain. Keys locked to it are revoked in the same transaction (they could never send again) and dropped
 * from every public worker's cache; emails already sent keep their records.
 */
export async function deleteDomain(productId: string, id: string): Promise<void> {
  if (!isUuid(id)) throw notFound('Domain')
  const revoked = await sql.begin(async (tx) => {
    // Lock the domain before reading its keys: a key being created for it holds a share lock on the row (its foreign
    // key) until it commits, so this waits for it and the next statement sees it. Revoking first and locking after
    // would miss that key, and `on delete set null` would leave it active and unlocked.
    const [domain] = await tx`select id from mail_domains where id = ${id} and product_id = ${productId} for update`
    if (!domain) throw notFound('Domain')
    const keys = await tx`
      update mail_api_keys set revoked_at = now()
      where domain_id = ${id} and product_id = ${productId} and revoked_at is null
      returning key_hash`
    await tx`delete from mail_domains where id = ${id}`
    return keys
  })
  for (const key of revoked) await publishInvalidation({ kind: 'mail_key', keyHash: Buffer.from(key.key_hash).toString('hex') })
}
