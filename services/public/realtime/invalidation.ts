// Wires this worker's caches (API keys, namespace policies) to the cross-process invalidation channel.
import { describeError, log } from '../../../shared/log'
import { onInvalidation, type Invalidation } from '../../../shared/realtime/invalidation'
import { forgetKey, setKeyCaching } from './api-keys'
import { forgetProduct, setPolicyCaching } from './policies'

let live = false

/** True while this worker is subscribed to invalidations (its caches are on); part of /readyz. */
export const invalidationsLive = () => live

/** Caches are on exactly while subscribed; switching either way empties them, so nothing missed in a gap survives. */
function setLive(on: boolean): void {
  if (on === live) return
  live = on
  setKeyCaching(on)
  setPolicyCaching(on)
  log(on ? 'info' : 'warn', on ? 'invalidations live: caching on' : 'invalidations lost: caching off until resubscribed')
}

function handle(message: Invalidation): void {
  if (message.kind === 'public_key') forgetKey(message.keyHash)
  else forgetProduct(message.productId)
}

/**
 * Subscribes to invalidations (retrying until Redis answers) and only then turns the caches on, so a worker never
 * serves from a cache it cannot drop; until then, and whenever the subscription drops, it serves uncached and /readyz
 * says so. Returns a function that unsubscribes and turns caching off.
 */
export async function listenForInvalidations(): Promise<() => Promise<void>> {
  for (let attempt = 1; ; attempt++) {
    try {
      const stop = await onInvalidation(handle, setLive)
      setLive(true)
      return async () => {
        setLive(false)
        await stop()
      }
    } catch (error) {
      if (attempt === 1 || attempt % 10 === 0) log('warn', 'cannot subscribe to invalidations yet; retrying', describeError(error))
      await Bun.sleep(Math.min(attempt * 200, 2000))
    }
  }
}
