// Webhook signatures as a receiver checks them: the `standardwebhooks` library (the reference implementation Svix
// publishes) verifies what shared/webhooks/signature.ts signs, with either secret during a rotation's overlap, and
// refuses a changed body, another secret and an old timestamp.
import { expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { Webhook } from 'standardwebhooks'
import { SECRET_PREFIX, signedHeaders } from '../../shared/webhooks/signature'

const newSecret = () => SECRET_PREFIX + randomBytes(32).toString('base64')
const body = JSON.stringify({ type: 'email.delivered', timestamp: '2026-11-25T14:00:00.000Z', data: { emailId: 'e1', to: ['ü@example.com'] } })
const now = () => Math.floor(Date.now() / 1000)

test('the reference library verifies a signed delivery and returns its payload', () => {
  const secret = newSecret()
  const headers = signedHeaders([secret], 'msg_2p1', now(), body)
  expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body))
  expect(headers['webhook-signature']!).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/)
})

test('during a rotation both secrets verify the same delivery', () => {
  const [newer, older] = [newSecret(), newSecret()]
  const headers = signedHeaders([newer, older], 'msg_2p2', now(), body)
  expect(headers['webhook-signature']!.split(' ')).toHaveLength(2)
  expect(new Webhook(newer).verify(body, headers)).toEqual(JSON.parse(body))
  expect(new Webhook(older).verify(body, headers)).toEqual(JSON.parse(body))
})

test('a changed body, another secret or a timestamp older than five minutes is refused', () => {
  const secret = newSecret()
  const headers = signedHeaders([secret], 'msg_2p3', now(), body)
  expect(() => new Webhook(secret).verify(body.replace('e1', 'e2'), headers)).toThrow()
  expect(() => new Webhook(newSecret()).verify(body, headers)).toThrow()
  const stale = signedHeaders([secret], 'msg_2p3', now() - 6 * 60, body)
  expect(() => new Webhook(secret).verify(body, stale)).toThrow()
})
