// The suppression list on the platform API: mail_suppressions_list (newest first, paginated by address) and
// mail_suppressions_delete (any case; 404 when not on this product's list). Entries are put there as the mailer does,
// one row per refused address; the mailer's own side is test/mail/delivery.test.ts.
import { beforeAll, describe, expect, test } from 'bun:test'
import { sql } from '../../shared/db/client'
import { call, failingFields, newPlatformKey, newProduct, ok } from '../helpers'

type Owner = Awaited<ReturnType<typeof newProduct>>
const as = (owner: { token: string; productId: string }, method: string, path: string) =>
  call(method, path, { token: owner.token, productId: owner.productId })

let owner: Owner
/** Newest first. */
const addresses = ['e@example.org', 'd@example.org', 'c@example.org', 'b@example.org', 'a@example.org']

/** What the mailer records for an address refused for good (services/mailer/queue.ts), `ago` seconds back. */
const suppress = (productId: string, address: string, ago: number) => sql`
  insert into mail_suppressions (product_id, address, reason, created_at)
  values (${productId}, ${address}, ${`550 5.1.1 <${address}>: user unknown`}, now() - ${ago} * interval '1 second')`

beforeAll(async () => {
  owner = await newProduct('Mail suppressions')
  for (const [i, address] of addresses.entries()) await suppress(owner.productId, address, i)
})

describe('mail_suppressions_list', () => {
  test('lists the addresses newest first with why, a page at a time after the last address', async () => {
    const first = ok(await as(owner, 'GET', '/mail/suppressions?limit=2'), 'page 1').body
    expect(first).toMatchObject({ object: 'list', has_more: true })
    expect(first.data[0]).toEqual({ address: 'e@example.org', reason: '550 5.1.1 <e@example.org>: user unknown', createdAt: expect.any(String) })
    const seen = first.data.map((s: any) => s.address)
    for (let after = seen.at(-1), more = true; more;) {
      const page = ok(await as(owner, 'GET', `/mail/suppressions?limit=2&after=${encodeURIComponent(after)}`), 'next page').body
      seen.push(...page.data.map((s: any) => s.address))
      more = page.has_more
      after = seen.at(-1)
    }
    expect(seen).toEqual(addresses)
  })

  test('bad paging is 400 naming the field; an address not on the list is a bad cursor', async () => {
    for (const [query, path] of [
      ['limit=0', '/query/limit'], ['limit=101', '/query/limit'], ['after=nobody@example.org', '/query/after'],
      [`after=${'x'.repeat(513)}`, '/query/after'], ['address=a@example.org', '/query/address'],
    ] as [string, string][]) {
      const result = await as(owner, 'GET', `/mail/suppressions?${query}`)
      expect([query, result.status]).toEqual([query, 400])
      expect(failingFields(result)).toEqual([path])
    }
  })
})

describe('mail_suppressions_delete', () => {
  test('removes the address (named in any case) and answers it; it is gone from the list; again is 404', async () => {
    const own = await newProduct()
    await suppress(own.productId, 'gone@example.org', 0)
    await suppress(own.productId, 'kept@example.org', 1)
    const removed = ok(await as(own, 'DELETE', `/mail/suppressions/${encodeURIComponent('Gone@Example.ORG')}`), 'delete').body
    expect(removed).toEqual({ address: 'gone@example.org', deleted: true })
    expect(ok(await as(own, 'GET', '/mail/suppressions'), 'list').body.data.map((s: any) => s.address)).toEqual(['kept@example.org'])
    const again = await as(own, 'DELETE', '/mail/suppressions/gone@example.org')
    expect([again.status, again.body.error]).toEqual([404, 'not_found'])
  })

  test("another product's list is invisible: its addresses are not listed, not a cursor, and not removable (404)", async () => {
    const other = await newProduct()
    expect(ok(await as(other, 'GET', '/mail/suppressions'), 'other list').body).toEqual({ object: 'list', has_more: false, data: [] })
    const cursor = await as(other, 'GET', '/mail/suppressions?after=a@example.org')
    expect(failingFields(cursor)).toEqual(['/query/after'])
    const removed = await as(other, 'DELETE', '/mail/suppressions/a@example.org')
    expect([removed.status, removed.body.error]).toEqual([404, 'not_found'])
    expect((await sql`select 1 from mail_suppressions where product_id = ${owner.productId} and address = 'a@example.org'`).length).toBe(1)
  })

  test('a platform key needs the mail area; no credential is 401', async () => {
    const mailKey = await newPlatformKey(owner, ['mail'])
    expect(ok(await call('GET', '/mail/suppressions', { token: mailKey.key }), 'mail key').body.data.length).toBe(addresses.length)
    const realtimeKey = await newPlatformKey(owner, ['realtime'])
    expect((await call('GET', '/mail/suppressions', { token: realtimeKey.key })).status).toBe(403)
    expect((await call('DELETE', '/mail/suppressions/a@example.org', { token: realtimeKey.key })).status).toBe(403)
    expect((await call('GET', '/mail/suppressions')).status).toBe(401)
  })
})
