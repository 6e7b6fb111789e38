// Cross-process cache invalidation over Redis pub/sub. A worker caches API keys and namespace policies for at most
// config.realtime.cacheTtlMs; a change published here drops the entry on every worker at once.
import { dedicatedRedis, redis } from '../redis'

export const INVALIDATION_CHANNEL = 'platform:invalidate'

export type Invalidation =
  | { kind: 'public_key'; keyHash: string; keyId: string } // keyHash: hex digest of the key's lookup hash
  | { kind: 'namespaces'; productId: string }
  | { kind: 'payload_storage'; productId: string }

export async function publishInvalidation(message: Invalidation): Promise<void> {
  // Workers key their caches by lower-case product id.
  const canonical = 'productId' in message ? { ...message, productId: message.productId.toLowerCase() } : message
  await redis().publish(INVALIDATION_CHANNEL, JSON.stringify(canonical))
}

/** Subscribes once per process; returns a promise that resolves when the subscription is active. */
export async function onInvalidation(listener: (message: Invalidation) => void): Promise<() => Promise<void>> {
  const subscriber = dedicatedRedis('invalidation')
  subscriber.on('message', (_channel: string, text: string) => {
    try {
      listener(JSON.parse(text) as Invalidation)
    } catch {}
  })
  await subscriber.subscribe(INVALIDATION_CHANNEL)
  return async () => {
    await subscriber.quit().catch(() => {})
  }
}
