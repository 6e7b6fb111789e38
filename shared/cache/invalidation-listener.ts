// Wires a process's caches to the cross-process invalidation channel (./invalidation.ts): public workers (API keys,
// policies) and gateways (policies, key revocations) alike.
import { describeError, log } from '../log'
import type { InvalidatedCache } from './invalidated-cache'
import { onInvalidation, type Invalidation } from './invalidation'

export interface InvalidationWiring {
  /** Caches that are trusted only while subscribed: on while live, off (and emptied) whenever the subscription drops. */
  caches: Pick<InvalidatedCache<unknown>, 'setCaching'>[]
  /** Every message, after the subscription is live (drop entries, close connections...). */
  onMessage(message: Invalidation): void
  /** Each time the subscription becomes live, the first time and after every drop: catch up on what was missed. */
  onLive?(): void
}

export interface InvalidationListener {
  /** True while subscribed (the caches are on); part of /readyz. */
  live(): boolean
  /** Unsubscribes and turns the caches off. */
  stop(): Promise<void>
}

/**
 * Subscribes to invalidations (retrying until Redis answers) and only then turns the caches on, so a process never
 * serves from a cache it cannot drop; until then, and whenever the subscription drops, it serves uncached and /readyz
 * says so. Returns at once; the subscription is made in the background.
 */
export function listenForInvalidations(wiring: InvalidationWiring): InvalidationListener {
  let live = false
  let stopped = false
  let unsubscribe: (() => Promise<void>) | undefined

  // Caches are on exactly while subscribed; switching either way empties them, so nothing missed in a gap survives.
  const setLive = (on: boolean) => {
    if (on === live || (on && stopped)) return
    live = on
    for (const cache of wiring.caches) cache.setCaching(on)
    log(on ? 'info' : 'warn', on ? 'invalidations live: caching on' : 'invalidations lost: caching off until resubscribed')
    if (on) wiring.onLive?.()
  }

  void (async () => {
    for (let attempt = 1; !stopped; attempt++) {
      try {
        const stop = await onInvalidation(wiring.onMessage, setLive)
        if (stopped) return void (await stop())
        unsubscribe = stop
        setLive(true)
        return
      } catch (error) {
        if (attempt === 1 || attempt % 10 === 0) log('warn', 'cannot subscribe to invalidations yet; retrying', describeError(error))
        await Bun.sleep(Math.min(attempt * 200, 2000))
      }
    }
  })()

  return {
    live: () => live,
    async stop() {
      stopped = true
      setLive(false)
      await unsubscribe?.()
    },
  }
}
