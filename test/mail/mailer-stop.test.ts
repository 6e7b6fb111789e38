// A stopped mailer starts no delivery: the loop (services/mailer/mailer.ts), run in this process against the real
// database, is stopped while its claim waits on a table lock held here; when the claim completes, the emails it claimed
// are given back (no lease, the attempt uncounted), never delivered or recorded.
import { expect, test } from 'bun:test'
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { startMailer } from '../../services/mailer/mailer'
import { smtpTransport } from '../../services/mailer/transport'
import { newProduct } from '../helpers'

test('stop() while claimDue waits: the claimed batch is released (lease and token cleared, attempts back) and nothing is attempted', async () => {
  const owner = await newProduct('Mailer stop during claim')
  const id = crypto.randomUUID()
  // Due since long ago, so it is first in the claim's order whatever else this database holds; no domain, so an attempt
  // would record `failed` at once (no SMTP needed to see that a delivery started).
  await sql`
    insert into emails (id, product_id, from_address, to_addresses, subject, text, message_id, next_attempt_at)
    values (${id}, ${owner.productId}, 'a@stop.example.com', ${['b@example.org']}, 'stop', 'x', ${`<${id}@stop.example.com>`}, '2000-01-01')`
  await sql`insert into email_events (email_id, kind, at) values (${id}, 'queued', now())`

  const lock = await sql.reserve()
  let mailer: ReturnType<typeof startMailer> | undefined
  try {
    await lock`begin`
    await lock`lock table emails in exclusive mode` // the claim's UPDATE (and its FOR UPDATE) waits on this
    mailer = startMailer(smtpTransport(config.mail.smtpUrl, config.mail.smtpTimeoutMs))
    // The claim is on its way: its query waits for the lock.
    for (const deadline = Date.now() + 10_000; ; await Bun.sleep(20)) {
      const [waiting] = await sql`
        select 1 from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and query like '%with due as%'`
      if (waiting) break
      if (Date.now() > deadline) throw new Error('the mailer never claimed')
    }
    const stopped = mailer.stop(10_000)
    await Bun.sleep(100)
    await lock`commit` // the claim completes, after stop()
    await stopped
  } finally {
    await lock`rollback`.catch(() => {})
    lock.release()
  }
  await Bun.sleep(300) // anything a delivery would have written, written
  const [row] = await sql`select last_event, attempts, lease_until, lease_token from emails where id = ${id}`
  expect(row).toEqual({ last_event: 'queued', attempts: 0, lease_until: null, lease_token: null })
  const events = await sql`select kind from email_events where email_id = ${id} order by id`
  expect(events.map((e) => e.kind)).toEqual(['queued'])
}, 30_000)
