// A publication sent through a public worker while Redis changes under it (a failover, a restart, Sentinel's switch):
// the fault tests' one way to publish and be sure it was acknowledged.
import { expect } from 'bun:test'
import { pub } from '../realtime/public-helpers'

/** What `explain` says within 3 s, or why it could not: the refusal's own message must never be lost to it. */
async function explained(explain: () => Promise<string> | string): Promise<string> {
  const late = Bun.sleep(3000).then(() => '(no explanation within 3 s)')
  try {
    return await Promise.race([Promise.resolve().then(explain), late])
  } catch (error) {
    return `(no explanation: ${error})`
  }
}

/** What a publication was acknowledged as: its number in the test, its offset and epoch. */
export interface Acked { n: number; offset: number; epoch: string }

/**
 * Publishes `{n}` on `channel`. While the worker finds Redis again a publish may be refused 503 `unavailable` (and is
 * sent again); any other refusal fails the test, and so does a refusal that lasts past `ms`: its error names the
 * refusals and the last one's words, and what `explain()` says of the system then (logs, a sentinel's view).
 */
export async function publishRetrying(
  worker: { url: string }, product: { productId: string; key: string }, channel: string, n: number, ms = 15_000,
  explain?: () => Promise<string> | string,
): Promise<Acked> {
  let refusals = 0
  for (const deadline = Date.now() + ms; ; await Bun.sleep(100)) {
    const result = await pub(worker, 'POST', `/${product.productId}/realtime/messages`, { key: product.key, body: { channel, data: { n } } })
    if (result.status === 200) return { n, offset: result.body.offset, epoch: result.body.epoch }
    expect({ n, status: result.status, body: result.body }).toMatchObject({ status: 503, body: { error: 'unavailable' } })
    refusals++
    if (Date.now() > deadline) {
      const context = explain ? `\n${await explained(explain)}` : ''
      throw new Error(`publish ${n} refused until the deadline (${refusals} refusals in ${ms} ms, the last: ${JSON.stringify(result.body)})${context}`)
    }
  }
}
