// Wires this worker's caches (API keys, namespace policies) to the cross-process invalidation channel.
import { describeError, log } from '../../../shared/log'
import { redis } from '../../../shared/redis'
import { onInvalidation } from '../../../shared/realtime/invalidation'
import { forgetKey, setKeyCaching } from './api-keys'
import { forgetProduct, setPolicyCaching } from './policies'

let live = false

/** True while this worker is subscribed to invalidations (its caches are on); part of /readyz. */
export const invalidationsLive = () => live

/**
 * Subscribes to invalidations and only then turns the caches on, so a worker never serves from a cache it cannot drop.
 * Until Redis answers, the worker serves uncached. Returns a function that unsubscribes and turns caching off.
 */
export async function listenForInvalidations(): Promise<() => Promise<void>> {
  // Wait for Redis first: onInvalidation opens a connection per call, and a failed attempt would leave one retrying.
  for (let attempt = 1; ; attempt++) {
    try {
      await redis().ping()
      break
    } catch (error) {
      if (attempt === 1 || attempt % 10 === 0) log('warn', 'redis not ready for invalidations; retrying', describeError(error))
      await Bun.sleep(Math.min(attempt * 200, 2000))
    }
  }
  const stop = await onInvalidation((message) => {
    if (message.kind === 'public_key') forgetKey(message.keyHash)
    else forgetProduct(message.productId)
  })
  setKeyCaching(true)
  setPolicyCaching(true)
  live = true
  return async () => {
    live = false
    setKeyCaching(false)
    setPolicyCaching(false)
    await stop()
  }
}
