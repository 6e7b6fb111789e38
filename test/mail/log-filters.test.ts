// The email log's filters (status, recipient, domain, since, until) on mail_emails_list and the public GET /emails: one
// shared reader, so both surfaces answer alike; bad values are 400 naming the field; another product sees nothing.
import { beforeAll, describe, expect, test } from 'bun:test'
import { buildPublicApp } from '../../services/public/app'
import { sql } from '../../shared/db/client'
import { call, callApp, failingFields, newProduct, ok } from '../helpers'

type Owner = Awaited<ReturnType<typeof newProduct>>
const publicApp = buildPublicApp()
const as = (owner: { token: string; productId: string }, method: string, path: string, body?: unknown) =>
  call(method, path, { token: owner.token, productId: owner.productId, body })

let owner: Owner
let key: string
const domains: { id: string; name: string }[] = []
/** Oldest first. */
const sent: { id: string; domain: number; to: string[]; cc?: string[] }[] = []

async function send(domain: number, to: string[], cc?: string[]) {
  const result = await callApp(publicApp, 'http://public.test', 'POST', `/${owner.productId}/mail/emails`, {
    headers: { 'x-api-key': key }, body: { from: `a@${domains[domain]!.name}`, to, ...(cc ? { cc } : {}), subject: 'f', text: 'hello' },
  })
  sent.push({ id: ok(result, 'send').body.id, domain, to, cc })
}

const ids = async (query: string) => ok(await as(owner, 'GET', `/mail/emails?${query}`), query).body.data.map((e: any) => e.id)
const publicIds = async (query: string) =>
  ok(await callApp(publicApp, 'http://public.test', 'GET', `/${owner.productId}/mail/emails?${query}`, { headers: { 'x-api-key': key } }), query)
    .body.data.map((e: any) => e.id)
const newestFirst = (picked: typeof sent) => picked.map((e) => e.id).reverse()

beforeAll(async () => {
  owner = await newProduct('Mail log filters')
  for (const prefix of ['f', 'g']) {
    domains.push(ok(await as(owner, 'POST', '/mail/domains', { name: `${prefix}${crypto.randomUUID().slice(0, 8)}.example.com` }), 'domain').body)
  }
  key = ok(await as(owner, 'POST', '/mail/api-keys', { name: 'full', scope: 'full_access' }), 'key').body.key
  await send(0, ['Ann <ann@example.org>'])
  await send(1, ['bob@example.org'], ['ANN@Example.org'])
  await send(0, ['carol@example.org'])
  await send(1, ['dave@example.org'])
  // What the mailer records when a server refuses the email for good: its last event.
  await sql`update emails set last_event = 'bounced' where id = ${sent[2]!.id}`
}, 30_000)

describe('filters', () => {
  test('status: only the emails whose last event it is', async () => {
    expect(await ids('status=bounced')).toEqual([sent[2]!.id])
    expect(await ids('status=queued')).toEqual(newestFirst([sent[0]!, sent[1]!, sent[3]!]))
    expect(await ids('status=delivered')).toEqual([])
  })

  test('recipient: the address alone, in To or Cc, whatever its case and display name', async () => {
    expect(await ids('recipient=ann@example.org')).toEqual(newestFirst([sent[0]!, sent[1]!]))
    expect(await ids(`recipient=${encodeURIComponent('Dave@EXAMPLE.org')}`)).toEqual([sent[3]!.id])
    expect(await ids('recipient=nobody@example.org')).toEqual([])
  })

  test('domain: the emails sent from it; a domain the product does not have matches nothing', async () => {
    expect(await ids(`domain=${domains[1]!.name}`)).toEqual(newestFirst([sent[1]!, sent[3]!]))
    expect(await ids(`domain=${domains[0]!.name.toUpperCase()}`)).toEqual(newestFirst([sent[0]!, sent[2]!]))
    expect(await ids('domain=elsewhere.example.com')).toEqual([])
  })

  test('since and until: created at or after since, before until', async () => {
    const [second] = await sql`select created_at from emails where id = ${sent[1]!.id}`
    const [fourth] = await sql`select created_at from emails where id = ${sent[3]!.id}`
    const since = (second!.created_at as Date).toISOString()
    // Microseconds cut off by toISOString: the first instant after the fourth email's millisecond includes it.
    const until = new Date((fourth!.created_at as Date).getTime() + 1).toISOString()
    expect(await ids(`since=${since}&until=${until}`)).toEqual(newestFirst([sent[1]!, sent[2]!, sent[3]!]))
    expect(await ids(`until=${since}`)).toEqual([sent[0]!.id])
  })

  test('filters combine, and a filtered log pages with limit and after', async () => {
    expect(await ids(`domain=${domains[0]!.name}&status=queued`)).toEqual([sent[0]!.id])
    const first = ok(await as(owner, 'GET', `/mail/emails?status=queued&limit=2`), 'page 1').body
    expect([first.data.map((e: any) => e.id), first.has_more]).toEqual([newestFirst([sent[1]!, sent[3]!]), true])
    const second = ok(await as(owner, 'GET', `/mail/emails?status=queued&limit=2&after=${sent[1]!.id}`), 'page 2').body
    expect([second.data.map((e: any) => e.id), second.has_more]).toEqual([[sent[0]!.id], false])
    const newer = ok(await as(owner, 'GET', `/mail/emails?status=queued&limit=2&before=${sent[0]!.id}`), 'newer').body
    expect(newer.data.map((e: any) => e.id)).toEqual(newestFirst([sent[1]!, sent[3]!]))
  })

  test('the public GET /emails takes the same filters and answers the same', async () => {
    for (const query of ['status=bounced', 'recipient=ann@example.org', `domain=${domains[1]!.name}&limit=1`]) {
      expect([query, await publicIds(query)]).toEqual([query, await ids(query)])
    }
  })

  test('bad values are 400 naming the field, on both surfaces', async () => {
    for (const [query, path] of [
      ['status=opened', '/query/status'], ['recipient=not-an-address', '/query/recipient'],
      [`recipient=${'a'.repeat(250)}@example.org`, '/query/recipient'], ['domain=-bad-', '/query/domain'],
      [`domain=${'a'.repeat(250)}.com`, '/query/domain'], ['since=yesterday', '/query/since'], ['until=2026-13-01T00:00:00Z', '/query/until'],
      ['since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z', '/query/until'],
      // Forms the date-time format lets through that JavaScript or PostgreSQL cannot read: 400, never a 500.
      [`since=${encodeURIComponent('2024-01-01T00:00:00Z[UTC]')}`, '/query/since'], ['until=0000-01-01T00:00:00Z', '/query/until'],
    ] as [string, string][]) {
      const result = await as(owner, 'GET', `/mail/emails?${query}`)
      expect([query, result.status]).toEqual([query, 400])
      expect(failingFields(result)).toEqual([path])
      const publicResult = await callApp(publicApp, 'http://public.test', 'GET', `/${owner.productId}/mail/emails?${query}`, { headers: { 'x-api-key': key } })
      expect([query, publicResult.status]).toEqual([query, 400])
      expect(failingFields(publicResult)).toEqual([path])
    }
  })

  test("another product's filters find none of this product's emails, even by its domain's name", async () => {
    const other = await newProduct()
    for (const query of ['recipient=ann@example.org', `domain=${domains[0]!.name}`, 'status=bounced']) {
      expect([query, ok(await as(other, 'GET', `/mail/emails?${query}`), query).body.data]).toEqual([query, []])
    }
  })
})
