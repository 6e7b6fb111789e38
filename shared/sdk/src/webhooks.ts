// Verifies a webhook delivery as Standard Webhooks defines it (docs/webhooks.md, "Verifying a delivery"): an HMAC-SHA256
// of `id.timestamp.body` under the secret's bytes, compared by WebCrypto (constant time), any of the space-separated
// `v1,` signatures matching (a secret rotation's overlap), and a timestamp within the tolerance (replay protection).
import type { Result } from './types.js'

export interface VerifyWebhookInput {
  /** The raw request body, exactly as received (parse it after verifying, never before). */
  payload: string
  /** The request's headers: webhook-id, webhook-timestamp, webhook-signature. */
  headers: Headers | Record<string, string | string[] | undefined>
  /** The endpoint's secret, `whsec_...` (the bare base64 is accepted too). */
  secret: string
  /** How far the timestamp may be from now, in seconds (default 300, as Standard Webhooks). */
  toleranceSeconds?: number
  /** Now, for tests. */
  now?: Date
}

const header = (headers: VerifyWebhookInput['headers'], name: string): string | undefined => {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined
  const entry = Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1]
  return Array.isArray(entry) ? entry[0] : entry
}

const bytesOf = (base64: string): Uint8Array<ArrayBuffer> | undefined => {
  try {
    return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0))
  } catch {
    return undefined
  }
}

const refused = (code: 'webhook_headers_missing' | 'webhook_timestamp_invalid' | 'webhook_signature_invalid', message: string) =>
  ({ data: null, error: { code, message, statusCode: null, retryable: false } }) as const

/** The delivery's parsed payload when its signature and timestamp verify; an error saying which did not otherwise. */
export async function verifyWebhook<T = unknown>(input: VerifyWebhookInput): Promise<Result<T>> {
  const id = header(input.headers, 'webhook-id')
  const timestamp = header(input.headers, 'webhook-timestamp')
  const signatures = header(input.headers, 'webhook-signature')
  if (!id || !timestamp || !signatures) return refused('webhook_headers_missing', 'webhook-id, webhook-timestamp and webhook-signature are all required')
  const seconds = Number(timestamp)
  const now = Math.floor((input.now ?? new Date()).getTime() / 1000)
  if (!/^\d+$/.test(timestamp) || Math.abs(now - seconds) > (input.toleranceSeconds ?? 300)) {
    return refused('webhook_timestamp_invalid', 'webhook-timestamp is not within the tolerance of now')
  }
  const secret = bytesOf(input.secret.startsWith('whsec_') ? input.secret.slice('whsec_'.length) : input.secret)
  if (!secret || secret.length === 0) return refused('webhook_signature_invalid', 'the secret is not whsec_ followed by base64')
  const key = await crypto.subtle.importKey('raw', secret, { name: 'HMAC', hash: 'SHA-256' }, false, ['verify'])
  const signed = new TextEncoder().encode(`${id}.${timestamp}.${input.payload}`)
  for (const candidate of signatures.split(' ')) {
    const [version, value] = candidate.split(',', 2)
    const signature = version === 'v1' && value ? bytesOf(value) : undefined
    if (signature && (await crypto.subtle.verify('HMAC', key, signature, signed))) {
      try {
        return { data: JSON.parse(input.payload) as T, error: null }
      } catch {
        return refused('webhook_signature_invalid', 'the signed payload is not JSON')
      }
    }
  }
  return refused('webhook_signature_invalid', 'no webhook-signature matches the payload under this secret')
}
