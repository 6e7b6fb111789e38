// Standard Webhooks signing (https://www.standardwebhooks.com, as Svix and Resend send): `webhook-id`,
// `webhook-timestamp` (Unix seconds) and `webhook-signature` = `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` under
// the secret's bytes, one signature per secret in force (space-separated), so a receiver holding either the old or
// the new secret verifies during a rotation's overlap.
import { createHmac } from 'node:crypto'

export const SECRET_PREFIX = 'whsec_'

/** The key bytes of a `whsec_<base64>` secret. */
export function secretKey(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error('a webhook secret starts with whsec_')
  return Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64')
}

/** One `v1,<base64>` signature of the message under `secret`. */
export function signature(secret: string, id: string, timestampSeconds: number, body: string): string {
  return `v1,${createHmac('sha256', secretKey(secret)).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`
}

/** The three headers of one delivery attempt, signed with every secret in force (the newest first). */
export function signedHeaders(secrets: readonly string[], id: string, timestampSeconds: number, body: string): Record<string, string> {
  if (secrets.length === 0) throw new Error('a webhook is signed with at least one secret')
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': secrets.map((secret) => signature(secret, id, timestampSeconds, body)).join(' '),
  }
}
