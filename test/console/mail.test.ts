// The console's Mail area in a real Chromium against real processes: an api that checks domains on a local DNS server
// (MAIL_DEV_VERIFY off), a public worker that takes sends, and a mailer delivering to an SMTP sink started here. What
// the page shows is read from it and compared with what the API answers.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Page } from 'playwright-core'
import { startSmtpSink, type Sink } from '../../scripts/smtp-sink'
import { sql } from '../../shared/db/client'
import { newProduct, startProcess, type Worker } from '../helpers'
import { startDnsServer, type DnsServer } from '../mail/dns-server'
import { CONFIRM_ARMED_MS } from '../../services/api/console/app/views/mail/parts'
import { expectNoOverflow, expectNoProblems, openArea, screenshot, useBrowser } from './browser'
import { watchRefusals } from './refusals'

type Owner = Awaited<ReturnType<typeof newProduct>>
interface DnsRecord { record: string; type: string; name: string; value: string; status: string }
interface Domain { id: string; name: string; status: string; records: DnsRecord[] }

let dns: DnsServer
let sink: Sink
let apiWorker: Worker
let publicWorker: Worker
let mailer: Worker
beforeAll(async () => {
  dns = await startDnsServer()
  // The default sink refuses bounce@… for good (550) and accepts everyone else.
  sink = await startSmtpSink({ port: 0 })
  ;[apiWorker, publicWorker, mailer] = await Promise.all([
    startProcess('api', { MAIL_DEV_VERIFY: '0', MAIL_DNS_SERVERS: `127.0.0.1:${dns.port}`, MAIL_DNS_TIMEOUT_MS: '1000' }),
    startProcess('public', { MAIL_SEND_RATE_PER_SECOND: '1000' }),
    startProcess('mailer', { SMTP_URL: `smtp://127.0.0.1:${sink.port}`, MAILER_POLL_MS: '50', MAIL_RETRY_BASE_MS: '200', MAIL_MAX_ATTEMPTS: '3' }),
  ])
}, 30_000)
afterAll(async () => {
  await Promise.all([apiWorker?.stop(), publicWorker?.stop(), mailer?.stop()])
  await sink?.close()
  dns?.close()
})
const browser = useBrowser(() => apiWorker.url)

/** A platform call on the api process (not in-process: this one checks DNS for real), as the product's owner. */
async function platform(owner: Owner, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(apiWorker.url + path, {
    method, headers: { authorization: `Bearer ${owner.token}`, 'x-product-id': owner.productId, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const answer = await response.json()
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(answer)}`)
  return answer
}

/** Publishes a domain's records on the local DNS server, as its owner would at their DNS provider. */
function publish(domain: Domain): void {
  for (const record of domain.records) dns.records.set(record.name, [...(dns.records.get(record.name) ?? []), record.value])
}

const uniqueDomain = (prefix: string) => `${prefix}${crypto.randomUUID().slice(0, 8)}.example.com`

/** A product with a domain verified through DNS, ready to send. */
async function sendingProduct(name: string): Promise<{ owner: Owner; domain: Domain }> {
  const owner = await newProduct(name)
  const created: Domain = await platform(owner, 'POST', '/mail/domains', { name: uniqueDomain('s') })
  publish(created)
  const domain: Domain = await platform(owner, 'POST', `/mail/domains/${created.id}/verify`)
  expect(domain.status).toBe('verified')
  return { owner, domain }
}

async function send(owner: Owner, key: string, body: Record<string, unknown>): Promise<string> {
  const response = await fetch(`${publicWorker.url}/${owner.productId}/mail/emails`, {
    method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify(body),
  })
  const answer = await response.json() as any
  if (response.status !== 200) throw new Error(`send: ${response.status} ${JSON.stringify(answer)}`)
  return answer.id
}

/**
 * The email once the mailer has finished with it (its last event one of `events`), as mail_emails_get answers it. The
 * deadline only turns a mailer that never finishes into a failure naming the email and where it stopped.
 */
async function settled(owner: Owner, id: string, events: string[], deadlineMs = 15_000): Promise<any> {
  let email: any
  for (const deadline = Date.now() + deadlineMs; Date.now() < deadline; await Bun.sleep(50)) {
    email = await platform(owner, 'GET', `/mail/emails/${id}`)
    if (events.includes(email.last_event)) return email
  }
  throw new Error(`email ${id} never reached ${events.join(' or ')}: still ${email?.last_event} after ${deadlineMs} ms (events: ${email?.events?.map((e: any) => e.type).join(', ')})`)
}

/** Every domain card on the page: its id, name, state and DNS records as the page shows them. */
const domainsOnPage = (page: Page) => page.$$eval('[data-domain-id]', (cards) => cards.map((card) => ({
  id: card.getAttribute('data-domain-id'),
  name: card.querySelector('.domain-name')!.textContent,
  status: card.querySelector('.domain-head .badge')!.textContent,
  records: [...card.querySelectorAll('table.records tbody tr')].map((row) => {
    const cells = row.querySelectorAll('td')
    return {
      record: cells[0]!.textContent, type: cells[1]!.textContent,
      name: cells[2]!.querySelector('[data-field=name]')!.textContent, value: cells[3]!.querySelector('[data-field=value]')!.textContent,
      status: cells[4]!.textContent,
    }
  }),
})))
const asShown = (domains: Domain[]) => domains.map(({ id, name, status, records }) => ({ id, name, status, records }))

describe('domains', () => {
  test('lists each domain with the DNS records the API answers; a domain added in the page; Verify checks DNS and shows each record\'s state', async () => {
    const owner = await newProduct('Mail console domains')
    const first: Domain = await platform(owner, 'POST', '/mail/domains', { name: uniqueDomain('a') })
    expect(first.status).toBe('pending')
    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'mail')
    await page.waitForSelector(`[data-domain-id="${first.id}"]`)
    expect(await domainsOnPage(page)).toEqual(asShown((await platform(owner, 'GET', '/mail/domains')).data))

    const added = uniqueDomain('b')
    await page.fill('[data-testid=domain-create] input[name=name]', added)
    await page.click('[data-testid=domain-create] button[type=submit]')
    await page.waitForFunction(() => document.querySelectorAll('[data-domain-id]').length === 2)
    const listed: Domain[] = (await platform(owner, 'GET', '/mail/domains')).data
    expect(listed.map((d) => d.name)).toEqual([added, first.name]) // newest first
    expect(await domainsOnPage(page)).toEqual(asShown(listed))
    const dkim = listed[0]!.records.find((r) => r.record === 'DKIM')!
    expect(dkim.value.length).toBeGreaterThan(255) // the long value is on the page whole, as one selectable text

    // The first one's records published: Verify finds all three. The added one has none: its check fails record by record.
    publish(first)
    await page.click(`[data-domain-id="${first.id}"] button.verify`)
    await page.waitForSelector(`[data-domain-id="${first.id}"] .domain-head .badge[data-state=verified]`)
    const secondId = listed[0]!.id
    await page.click(`[data-domain-id="${secondId}"] button.verify`)
    await page.waitForSelector(`[data-domain-id="${secondId}"] .domain-head .badge[data-state=failed]`)
    const checked = [await platform(owner, 'GET', `/mail/domains/${secondId}`), await platform(owner, 'GET', `/mail/domains/${first.id}`)]
    expect(checked.map((d) => [d.status, d.records.map((r: DnsRecord) => r.status)])).toEqual([
      ['failed', ['failed', 'failed', 'failed']], ['verified', ['verified', 'verified', 'verified']],
    ])
    expect(await domainsOnPage(page)).toEqual(asShown(checked))
    await screenshot(page, 'mail-domains')

    // One domain on its own (mail_domain_get), then deleted from there.
    await page.click(`[data-domain-id="${secondId}"] a.domain-name`)
    await page.waitForSelector(`[data-testid=domain] [data-domain-id="${secondId}"]`)
    expect(await domainsOnPage(page)).toEqual(asShown([checked[0]]))
    // A first click arms Delete; a press anywhere else disarms it, and a later click only arms it again.
    const danger = `[data-domain-id="${secondId}"] button.danger`
    await page.click(danger)
    await page.waitForSelector(`${danger}[data-armed]:text-is("Confirm delete")`)
    await page.click('[data-domain-id] .hint')
    await page.waitForSelector(`${danger}:not([data-armed]):text-is("Delete")`)
    await page.click(danger)
    await page.waitForSelector(`${danger}[data-armed]`)
    await page.keyboard.press('Escape')
    await page.waitForSelector(`${danger}:not([data-armed]):text-is("Delete")`)
    expect((await platform(owner, 'GET', '/mail/domains')).data).toHaveLength(2)
    await page.click(`[data-domain-id="${secondId}"] button.danger`)
    await page.click(`[data-domain-id="${secondId}"] button.danger:text("Confirm delete")`)
    await page.waitForFunction((id) => !document.querySelector(`[data-domain-id="${id}"]`) && document.querySelectorAll('[data-domain-id]').length === 1, secondId)
    expect((await platform(owner, 'GET', '/mail/domains')).data.map((d: Domain) => d.id)).toEqual([first.id])
    expectNoProblems(console)
  })
})

describe('sending keys', () => {
  test('a key created in the page shows its secret once, which sends; the list shows what the API lists; after leaving the view the secret is gone', async () => {
    const { owner, domain } = await sendingProduct('Mail console keys')
    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'mail')
    await page.click('nav.tabs a:text("API keys")')
    await page.waitForSelector('[data-testid=keys] .empty')
    await page.waitForSelector(`[data-testid=key-create] select[name=domainId] option[value="${domain.id}"]`, { state: 'attached' })
    await page.fill('[data-testid=key-create] input[name=name]', 'console sender')
    await page.selectOption('[data-testid=key-create] select[name=scope]', 'sending_access')
    await page.selectOption('[data-testid=key-create] select[name=domainId]', domain.id)
    await page.click('[data-testid=key-create] button[type=submit]')
    const secret = (await page.textContent('[data-testid=new-key-secret]'))!
    expect(await page.textContent('[data-testid=new-key]')).toContain('Copy it now')
    await page.waitForSelector('[data-testid=keys] table')

    const keys = (await platform(owner, 'GET', '/mail/api-keys')).data
    expect(keys).toHaveLength(1)
    expect(keys[0]).toMatchObject({ name: 'console sender', scope: 'sending_access', domainId: domain.id })
    expect(secret.startsWith(keys[0].prefix)).toBe(true)
    expect(JSON.stringify(keys)).not.toContain(secret)
    const rows = await page.$$eval('[data-testid=keys] tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].slice(0, 4).map((td) => td.textContent)))
    expect(rows).toEqual([['console sender', `${keys[0].prefix}…`, 'sending_access', domain.name]])
    // The secret the page showed is the key itself: it sends from the domain it is locked to.
    expect(await send(owner, secret, { from: `hi@${domain.name}`, to: 'ann@example.org', subject: 'from the console key', text: 'hi' })).toBeString()

    await page.click('nav.tabs a:text("Domains")')
    await page.waitForSelector(`[data-domain-id="${domain.id}"]`)
    await page.click('nav.tabs a:text("API keys")')
    await page.waitForSelector('[data-testid=keys] table')
    expect(await page.$('[data-testid=new-key]')).toBeNull()
    expect(await page.textContent('body')).not.toContain(secret)

    // Left armed, Delete disarms by itself (CONFIRM_ARMED_MS): no stray later click can delete the key.
    await page.click('[data-testid=keys] button.danger')
    await page.waitForSelector('[data-testid=keys] button.danger[data-armed]:text-is("Confirm delete")')
    await page.waitForSelector('[data-testid=keys] button.danger:not([data-armed]):text-is("Delete")', { timeout: CONFIRM_ARMED_MS + 10_000 })
    expect((await platform(owner, 'GET', '/mail/api-keys')).data).toHaveLength(1)
    await page.click('[data-testid=keys] button.danger')
    await page.click('[data-testid=keys] button.danger:text("Confirm delete")')
    await page.waitForSelector('[data-testid=keys] .empty')
    expect((await platform(owner, 'GET', '/mail/api-keys')).data).toEqual([])
    expectNoProblems(console)
  })
})

describe('email log', () => {
  /** The timeline as the page shows it: each event's type, time and detail. */
  const eventsOnPage = (page: Page) => page.$$eval('[data-testid=events] li', (items) => items.map((item) => ({
    type: item.getAttribute('data-type'), badge: item.querySelector('.badge')!.textContent,
    at: item.querySelector('time')!.getAttribute('datetime'), detail: item.querySelector('.event-detail')?.textContent ?? null,
  })))
  const asTimeline = (events: { type: string; at: string; detail?: unknown }[]) => events.map((e) => ({
    type: e.type, badge: e.type, at: e.at,
    detail: e.detail === undefined ? null : typeof e.detail === 'string' ? e.detail : JSON.stringify(e.detail),
  }))

  test('emails sent through the public route are listed newest first; one delivered and one bounced show the events the API reports', async () => {
    const { owner, domain } = await sendingProduct('Mail console log')
    const { key } = await platform(owner, 'POST', '/mail/api-keys', { name: 'log', scope: 'full_access' })
    const deliveredId = await send(owner, key, {
      from: `Acme <hello@${domain.name}>`, to: ['Ann <ann@example.org>'], cc: 'cid@example.org', subject: 'Your receipt',
      text: 'Thanks for your order.', html: '<p>Thanks for your <b>order</b>.</p><script>alert(1)</script>', tags: [{ name: 'kind', value: 'receipt' }],
    })
    const bouncedId = await send(owner, key, { from: `hello@${domain.name}`, to: 'bounce@example.org', subject: 'Nobody home', text: 'hello?' })
    const delivered = await settled(owner, deliveredId, ['delivered', 'failed', 'bounced'])
    const bounced = await settled(owner, bouncedId, ['bounced', 'failed', 'delivered'])
    expect([delivered.last_event, bounced.last_event]).toEqual(['delivered', 'bounced'])

    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'mail')
    await page.click('nav.tabs a:text("Email log")')
    await page.waitForSelector('[data-testid=emails] table.email-log')
    const list = await platform(owner, 'GET', '/mail/emails')
    expect(list.data.map((e: any) => e.id)).toEqual([bouncedId, deliveredId])
    const rows = await page.$$eval('table.email-log tbody tr', (trs) => trs.map((tr) => ({
      id: tr.querySelector('a.subject')!.getAttribute('data-email-id'), subject: tr.querySelector('a.subject')!.textContent,
      to: tr.querySelectorAll('td')[2]!.textContent, last_event: tr.querySelector('.badge')!.textContent,
    })))
    expect(rows).toEqual(list.data.map((e: any) => ({ id: e.id, subject: e.subject, to: e.to.join(', '), last_event: e.last_event })))
    expect(await page.isDisabled('[data-testid=older]')).toBe(true) // two emails: one page

    await page.click(`a.subject[data-email-id="${deliveredId}"]`)
    await page.waitForSelector(`[data-testid=email][data-email-id="${deliveredId}"]`)
    expect(await eventsOnPage(page)).toEqual(asTimeline(delivered.events))
    expect(delivered.events.map((e: any) => e.type)).toEqual(['queued', 'sent', 'delivered'])
    expect(await page.textContent('.email-subject')).toBe('Your receipt')
    // The HTML is shown as its source, as text: the script in it is characters on the page, not an element.
    expect(await page.textContent('pre.content-html')).toBe(delivered.html)
    expect(await page.$$eval('[data-testid=email] script', (scripts) => scripts.length)).toBe(0)
    await screenshot(page, 'mail-email')

    await page.click('a:text("The email log")')
    await page.click(`a.subject[data-email-id="${bouncedId}"]`)
    await page.waitForSelector(`[data-testid=email][data-email-id="${bouncedId}"]`)
    const bouncedEvents = await eventsOnPage(page)
    expect(bouncedEvents).toEqual(asTimeline(bounced.events))
    expect(bouncedEvents.map((e) => e.type)).toEqual(['queued', 'bounced'])
    expect(bouncedEvents[1]!.detail).toContain('550')
    expectNoProblems(console)
  })

  test('the log pages: Older walks back page by page after the last email, Newer walks forward before the first', async () => {
    const { owner, domain } = await sendingProduct('Mail console pages')
    const { key } = await platform(owner, 'POST', '/mail/api-keys', { name: 'pages', scope: 'full_access' })
    // Three pages of 20, 20 and 1; one subject on the middle page is a single unbroken word far wider than the page.
    const long = `n0-${'x'.repeat(600)}`
    for (let i = 0; i < 41; i++) await send(owner, key, { from: `hello@${domain.name}`, to: 'ann@example.org', subject: i === 15 ? long : `n${i}`, text: 'hi' })
    const ids = (page: { data: { id: string }[] }) => page.data.map((e) => e.id)
    const pages: string[][] = [ids(await platform(owner, 'GET', '/mail/emails?limit=20'))]
    pages.push(ids(await platform(owner, 'GET', `/mail/emails?limit=20&after=${pages[0]!.at(-1)}`)))
    pages.push(ids(await platform(owner, 'GET', `/mail/emails?limit=20&after=${pages[1]!.at(-1)}`)))
    expect(pages.map((p) => p.length)).toEqual([20, 20, 1])
    expect(new Set(pages.flat()).size).toBe(41)

    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'mail')
    await page.click('nav.tabs a:text("Email log")')
    const shown = () => page.$$eval('table.email-log a.subject', (links) => links.map((a) => a.getAttribute('data-email-id')))
    /** Waits until the log shows exactly `expected` (read from the page), then checks which way it can go on. */
    const expectPage = async (expected: string[], can: { newer: boolean; older: boolean }) => {
      // A generous deadline, so that a wrong page fails here showing what the page has instead of timing the test out.
      await page.waitForFunction((want) => {
        const got = [...document.querySelectorAll('table.email-log a.subject')].map((a) => a.getAttribute('data-email-id'))
        return JSON.stringify(got) === JSON.stringify(want)
      }, expected, { timeout: 8000 }).catch(() => undefined)
      expect(await shown()).toEqual(expected)
      expect({ newer: await page.isEnabled('[data-testid=newer]'), older: await page.isEnabled('[data-testid=older]') }).toEqual(can)
    }
    await expectPage(pages[0]!, { newer: false, older: true })
    await page.click('[data-testid=older]')
    await expectPage(pages[1]!, { newer: true, older: true })
    // The unbroken subject wraps inside its cell: the log is no wider than its card.
    expect(await page.$eval('table.email-log', (table) => table.scrollWidth <= table.parentElement!.clientWidth)).toBe(true)
    expect(await page.textContent('table.email-log a.subject:text-matches("^n0-x")')).toBe(long)
    await page.click('[data-testid=older]')
    await expectPage(pages[2]!, { newer: true, older: false })
    // Newer from the last page is the middle page (the 20 just before its first email), not the newest one.
    await page.click('[data-testid=newer]')
    await expectPage(pages[1]!, { newer: true, older: true })
    await page.click('[data-testid=newer]')
    await expectPage(pages[0]!, { newer: false, older: true })
    expectNoProblems(console)
  })
})

describe('filters, suppressions and webhook deliveries', () => {
  /** The email ids the log shows, once it shows `expected` (a wrong answer fails on the comparison, showing the page). */
  const expectLog = async (page: Page, expected: string[]) => {
    await page.waitForFunction((want) => {
      const got = [...document.querySelectorAll('table.email-log a.subject')].map((a) => a.getAttribute('data-email-id'))
      return JSON.stringify(got) === JSON.stringify(want)
    }, expected, { timeout: 8000 }).catch(() => undefined)
    expect(await page.$$eval('table.email-log a.subject', (links) => links.map((a) => a.getAttribute('data-email-id')))).toEqual(expected)
  }

  /** Nothing on the page reaches past the window or past its box at 390, 1280 and 1920 px (expectNoOverflow). */
  const expectFluid = async (page: Page) => {
    for (const width of [390, 1280, 1920]) {
      await page.setViewportSize({ width, height: 860 })
      await expectNoOverflow(page, `at ${width} px`)
    }
    await page.setViewportSize({ width: 1280, height: 860 })
  }

  test('the email log filtered to one recipient, then to a status, shows what the API answers for the same filter', async () => {
    const { owner, domain } = await sendingProduct('Mail console filter')
    const { key } = await platform(owner, 'POST', '/mail/api-keys', { name: 'filter', scope: 'full_access' })
    const longAddress = `${'a-long-local-part-'.repeat(3)}x@${Array(8).fill('a-long-subdomain-label').join('.')}.example.org`
    const ann = await send(owner, key, { from: `hello@${domain.name}`, to: 'Ann <ann@example.org>', subject: 'for Ann', text: 'hi' })
    const bob = await send(owner, key, { from: `hello@${domain.name}`, to: ['bob@example.org', longAddress], subject: 'for Bob', text: 'hi' })
    const annAgain = await send(owner, key, { from: `hello@${domain.name}`, to: 'bob@example.org', cc: 'ANN@example.org', subject: 'cc Ann', text: 'hi' })
    const bounced = await send(owner, key, { from: `hello@${domain.name}`, to: 'bounce@example.org', subject: 'nobody', text: 'hi' })
    await settled(owner, bounced, ['bounced', 'failed', 'delivered'])

    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'mail')
    await page.click('nav.tabs a:text("Email log")')
    await expectLog(page, (await platform(owner, 'GET', '/mail/emails')).data.map((e: any) => e.id))
    await page.fill('[data-testid=email-filter] input[name=recipient]', 'ann@example.org')
    await page.click('[data-testid=email-filter] button[type=submit]')
    const forAnn = (await platform(owner, 'GET', '/mail/emails?recipient=ann@example.org')).data.map((e: any) => e.id)
    expect(forAnn).toEqual([annAgain, ann])
    await expectLog(page, forAnn)
    await expectFluid(page)

    await page.click('[data-testid=clear-filter]')
    await expectLog(page, [bounced, annAgain, bob, ann])
    await page.selectOption('[data-testid=email-filter] select[name=status]', 'bounced')
    await page.click('[data-testid=email-filter] button[type=submit]')
    await expectLog(page, (await platform(owner, 'GET', '/mail/emails?status=bounced')).data.map((e: any) => e.id))
    await page.fill('[data-testid=email-filter] input[name=recipient]', 'nobody@example.org')
    await page.click('[data-testid=email-filter] button[type=submit]')
    await page.waitForSelector('[data-testid=emails] .empty')
    expect(await page.textContent('[data-testid=emails] .empty')).toBe('No email matches the filter.')
    expectNoProblems(console)
  })

  test('an address the mailer suppressed is listed with why and removed from the page after a confirmation; the next email to it is attempted again', async () => {
    const { owner, domain } = await sendingProduct('Mail console suppressions')
    const { key } = await platform(owner, 'POST', '/mail/api-keys', { name: 'suppress', scope: 'full_access' })
    const first = await send(owner, key, { from: `hello@${domain.name}`, to: 'bounce@example.org', subject: 'first', text: 'hi' })
    await settled(owner, first, ['bounced', 'failed', 'delivered'])
    const [entry] = (await platform(owner, 'GET', '/mail/suppressions')).data
    expect([entry.address, entry.reason]).toEqual(['bounce@example.org', expect.stringContaining('550')])

    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'mail')
    await page.click('nav.tabs a:text("Suppressions")')
    const row = 'table.suppression-list tbody tr:has([data-address="bounce@example.org"])'
    await page.waitForSelector(row)
    expect(await page.textContent(`${row} .reason`)).toBe(entry.reason)
    await expectFluid(page)
    await page.click(`${row} [data-testid=remove]`)
    expect(await page.textContent(`${row} [data-testid=remove]`)).toBe('Confirm remove')
    expect((await platform(owner, 'GET', '/mail/suppressions')).data).toHaveLength(1) // asked, not yet done
    await page.click(`${row} [data-testid=remove]`)
    await page.waitForSelector('[data-testid=suppressions] .empty')
    expect((await platform(owner, 'GET', '/mail/suppressions')).data).toEqual([])

    // Off the list, the address is tried again: refused again by the server (bounced), not skipped (suppressed).
    const second = await send(owner, key, { from: `hello@${domain.name}`, to: 'bounce@example.org', subject: 'second', text: 'hi' })
    expect((await settled(owner, second, ['bounced', 'failed', 'delivered', 'suppressed'])).last_event).toBe('bounced')
    expectNoProblems(console)
  })

  test('the suppression list shows 50 addresses, and More appends the next page as the API pages it', async () => {
    const owner = await newProduct('Mail console suppression pages')
    // 51 entries as the mailer records them (one row per refused address), a second apart, newest last inserted.
    await sql`
      insert into mail_suppressions (product_id, address, reason, created_at)
      select ${owner.productId}, 'r' || i || '@example.org', '550 5.1.1 user unknown', now() - (i * interval '1 second')
      from generate_series(1, 51) as i`
    const walked: string[] = []
    for (let after: string | undefined, more = true; more;) {
      const page = await platform(owner, 'GET', `/mail/suppressions?limit=50${after ? `&after=${after}` : ''}`)
      walked.push(...page.data.map((s: any) => s.address))
      more = page.has_more
      after = walked.at(-1)
    }
    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'mail')
    await page.click('nav.tabs a:text("Suppressions")')
    const shown = () => page.$$eval('table.suppression-list [data-address]', (cells) => cells.map((c) => c.getAttribute('data-address')))
    await page.waitForSelector('[data-testid=more]:not([hidden])')
    expect(await shown()).toEqual(walked.slice(0, 50))
    await page.click('[data-testid=more]')
    await page.waitForSelector('[data-testid=more][hidden]', { state: 'attached' })
    expect(await shown()).toEqual(walked)
    expect(walked).toHaveLength(51)
    expectNoProblems(console)
  })

  test("an email's page lists the webhook deliveries of its events, as mail_emails_deliveries_list answers them", async () => {
    const { owner, domain } = await sendingProduct('Mail console email deliveries')
    const { key } = await platform(owner, 'POST', '/mail/api-keys', { name: 'hooks', scope: 'full_access' })
    // No webhooks process runs in this file: the deliveries wait, pending, as the email page shows them.
    const endpoint = await platform(owner, 'POST', '/mail/webhooks', { url: `http://127.0.0.1:65000/${'deep/'.repeat(60)}hook`, eventKinds: ['*'] })
    const id = await send(owner, key, { from: `hello@${domain.name}`, to: 'ann@example.org', subject: 'watched', text: 'hi' })
    await settled(owner, id, ['delivered', 'failed', 'bounced'])
    const listed = (await platform(owner, 'GET', `/mail/emails/${id}/webhook-deliveries`)).data
    expect(listed.map((d: any) => d.eventKind).sort()).toEqual(['email.delivered', 'email.sent'])

    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'mail')
    await page.evaluate((hash) => { location.hash = hash }, `#/p/${owner.productId}/mail/emails/${id}`)
    await page.waitForSelector('[data-testid=email-deliveries] table')
    const shown = await page.$$eval('[data-testid=email-deliveries] tbody tr', (rows) => rows.map((row) => ({
      id: row.querySelector('[data-delivery-id]')!.getAttribute('data-delivery-id'), event: row.querySelector('code')!.textContent,
      endpoint: row.querySelector('.endpoint-url')!.textContent, state: row.querySelector('.badge')!.textContent,
    })))
    expect(shown).toEqual(listed.map((d: any) => ({ id: d.id, event: d.eventKind, endpoint: endpoint.url, state: d.state })))
    await expectFluid(page)
    await page.click(`[data-testid=email-deliveries] [data-delivery-id="${listed[0].id}"]`)
    await page.waitForSelector(`[data-testid=delivery][data-delivery-id="${listed[0].id}"]`)
    expect(await page.textContent('[data-testid=message-id]')).toBe(listed[0].messageId)
    expectNoProblems(console)
  })
})

describe('errors', () => {
  test("the API's refusals are shown as it words them: a bad domain name names its field; another product's email is not found", async () => {
    const { owner } = await sendingProduct('Mail console errors')
    const stranger = await sendingProduct('Mail console stranger')
    const { key } = await platform(stranger.owner, 'POST', '/mail/api-keys', { name: 'theirs', scope: 'full_access' })
    const theirs = await send(stranger.owner, key, { from: `hi@${stranger.domain.name}`, to: 'ann@example.org', subject: 'private', text: 'hi' })
    const console = await browser.open()
    const { page } = console
    const refusals = watchRefusals(page)
    await openArea(page, owner, owner.productId, 'mail')
    await page.waitForSelector('[data-domain-id]')
    await page.fill('[data-testid=domain-create] input[name=name]', 'not a domain')
    await page.click('[data-testid=domain-create] button[type=submit]')
    await page.waitForSelector('[data-testid=domain-create] .error:not(:empty)')
    expect(await page.textContent('[data-testid=domain-create] .error')).toContain('/body/name')
    expect(await page.$$eval('[data-domain-id]', (cards) => cards.length)).toBe(1)

    await page.evaluate((hash) => { location.hash = hash }, `#/p/${owner.productId}/mail/emails/${theirs}`)
    await page.waitForSelector('[data-testid=email-error]')
    expect(await page.textContent('[data-testid=email-error]')).toMatch(/not found/i)
    expect(await page.textContent('body')).not.toContain('private')
    // The only requests refused are the two above, and the only problems the page saw are the browser's notes of them.
    refusals.expectOnly(console, [
      { method: 'POST', status: 400, path: '/mail/domains' },
      { method: 'GET', status: 404, path: `/mail/emails/${theirs}` },
    ])
  })
})
