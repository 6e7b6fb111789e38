// The SDK's webhook verification (WebCrypto, no Node built-ins) against what the platform signs
// (shared/webhooks/signature.ts): it accepts and refuses exactly what the `standardwebhooks` reference library does,
// and says which check failed.
import { expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { Webhook } from 'standardwebhooks'
import { Platform, verifyWebhook } from '../../shared/sdk/src/index'
import { SECRET_PREFIX, signedHeaders } from '../../shared/webhooks/signature'

const newSecret = () => SECRET_PREFIX + randomBytes(32).toString('base64')
const payload = JSON.stringify({ type: 'email.delivered', timestamp: '2026-11-29T08:00:00.000Z', data: { emailId: 'e1', to: ['ü@example.com'] } })
const now = () => Math.floor(Date.now() / 1000)
const [secret, older, stranger] = [newSecret(), newSecret(), newSecret()]

/** Deliveries as a receiver may get them, each with whether it must verify under `secret`. */
const cases: { name: string; body: string; headers: Record<string, string>; verifies: boolean; code?: string }[] = [
  { name: 'signed with the secret', body: payload, headers: signedHeaders([secret], 'msg_1', now(), payload), verifies: true },
  { name: 'signed with both secrets of a rotation', body: payload, headers: signedHeaders([older, secret], 'msg_2', now(), payload), verifies: true },
  { name: 'a changed body', body: payload.replace('e1', 'e2'), headers: signedHeaders([secret], 'msg_3', now(), payload), verifies: false, code: 'webhook_signature_invalid' },
  { name: 'another id than the one signed', body: payload, headers: { ...signedHeaders([secret], 'msg_4', now(), payload), 'webhook-id': 'msg_5' }, verifies: false, code: 'webhook_signature_invalid' },
  { name: 'signed with another secret', body: payload, headers: signedHeaders([stranger], 'msg_6', now(), payload), verifies: false, code: 'webhook_signature_invalid' },
  { name: 'six minutes old', body: payload, headers: signedHeaders([secret], 'msg_7', now() - 6 * 60, payload), verifies: false, code: 'webhook_timestamp_invalid' },
  { name: 'six minutes ahead', body: payload, headers: signedHeaders([secret], 'msg_8', now() + 6 * 60, payload), verifies: false, code: 'webhook_timestamp_invalid' },
  { name: 'without a signature', body: payload, headers: { 'webhook-id': 'msg_9', 'webhook-timestamp': String(now()) }, verifies: false, code: 'webhook_headers_missing' },
  { name: 'a v2 signature only', body: payload, headers: { ...signedHeaders([secret], 'msg_10', now(), payload), 'webhook-signature': 'v2,AAAA' }, verifies: false, code: 'webhook_signature_invalid' },
]

for (const delivery of cases) {
  test(`a delivery ${delivery.name} ${delivery.verifies ? 'verifies' : 'is refused'}, as standardwebhooks decides`, async () => {
    let reference = true
    try {
      new Webhook(secret).verify(delivery.body, delivery.headers)
    } catch {
      reference = false
    }
    expect(reference).toBe(delivery.verifies)
    const { data, error } = await verifyWebhook({ payload: delivery.body, headers: delivery.headers, secret })
    if (delivery.verifies) expect({ data, error }).toEqual({ data: JSON.parse(payload), error: null })
    else expect({ data, error }).toEqual({ data: null, error: { code: delivery.code as any, message: expect.any(String), statusCode: null, retryable: false } })
  })
}

test('a Request\'s Headers work as well as a plain object, through the client too', async () => {
  const headers = new Headers(signedHeaders([secret], 'msg_11', now(), payload))
  const platform = new Platform({ baseUrl: 'https://public.example', productId: 'p' })
  expect((await platform.webhooks.verify({ payload, headers, secret })).data).toEqual(JSON.parse(payload))
  // The bare base64 of the secret is accepted, as standardwebhooks accepts it.
  expect((await verifyWebhook({ payload, headers, secret: secret.slice(SECRET_PREFIX.length) })).error).toBeNull()
})
