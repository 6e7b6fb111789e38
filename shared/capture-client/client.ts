// The browser capture library: events queued, sent in batches to POST {public_url}/{productId}/capture with a publishable
// key (ptk_), and flushed with navigator.sendBeacon when the page is hidden or left. Plain TypeScript, no dependencies;
// bundle it into a page (Bun.build, target browser). docs/analytics.md, "Capture from browsers".

export interface CaptureOptions {
  /** The platform's public URL ({public_url}), e.g. https://public.example.com. */
  baseUrl: string
  productId: string
  /** The publishable key (ptk_...): made to be embedded in pages. */
  key: string
  /** Send as soon as this many events are queued (default 20; at most 1000, the route's batch). */
  flushAt?: number
  /** Send what is queued at least this often, in ms (default 5000). */
  flushIntervalMs?: number
  /** Most events held while the route cannot be reached; past it the oldest are dropped (default 1000). */
  maxQueue?: number
  /** Where the anonymous id is kept (default: localStorage when usable, else memory only). */
  storage?: Pick<Storage, 'getItem' | 'setItem' | 'removeItem'> | null
}

export interface Capture {
  /** Queues one event (timestamped now) for the current identity. */
  capture(event: string, properties?: Record<string, unknown>): void
  /** Names the user from now on (events carry users_id beside the anonymous id) and captures `$identify`. */
  identify(usersId: string, properties?: Record<string, unknown>): void
  /** Forgets the user and starts a new anonymous id (sign-out). */
  reset(): void
  /** Sends what is queued now; true when the route accepted all of it (or nothing was queued). */
  flush(): Promise<boolean>
  /** The anonymous id events carry. */
  readonly anonymousId: string
  /** Events waiting to be sent. */
  readonly queued: number
  /** Stops the timer and the page listeners (the queue is flushed by beacon first). */
  close(): void
}

interface QueuedEvent {
  event: string
  timestamp: string
  identity: { anonymous_id: string; users_id?: string }
  properties?: Record<string, unknown>
}

const ANONYMOUS_ID_ITEM = 'platform_capture_anonymous_id'
/** The route's batch bound. */
const MAX_BATCH = 1000
/** Browsers refuse beacons past 64 KiB (all in flight together): each beacon stays under this. */
const BEACON_BYTES = 60_000

function usableStorage(): CaptureOptions['storage'] {
  try {
    const storage = globalThis.localStorage
    storage.setItem('platform_capture_probe', '1')
    storage.removeItem('platform_capture_probe')
    return storage
  } catch {
    return null // private modes, sandboxed frames, no DOM
  }
}

const newId = () =>
  typeof crypto !== 'undefined' && 'randomUUID' in crypto ? crypto.randomUUID() : `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`

/**
 * @example
 * const analytics = createCapture({ baseUrl: 'https://public.example.com', productId, key: 'ptk_...' })
 * analytics.capture('signup_clicked', { plan: 'pro' })
 */
export function createCapture(options: CaptureOptions): Capture {
  const url = `${options.baseUrl.replace(/\/+$/, '')}/${encodeURIComponent(options.productId)}/capture?key=${encodeURIComponent(options.key)}`
  const flushAt = Math.min(MAX_BATCH, Math.max(1, options.flushAt ?? 20))
  const maxQueue = Math.max(1, options.maxQueue ?? 1000)
  const storage = options.storage === undefined ? usableStorage() : options.storage
  let anonymousId = storage?.getItem(ANONYMOUS_ID_ITEM) || newId()
  storage?.setItem(ANONYMOUS_ID_ITEM, anonymousId)
  let usersId: string | undefined
  let queue: QueuedEvent[] = []
  let sending: Promise<boolean> | undefined

  const enqueue = (event: string, properties?: Record<string, unknown>) => {
    queue.push({
      event, timestamp: new Date().toISOString(),
      identity: usersId ? { anonymous_id: anonymousId, users_id: usersId } : { anonymous_id: anonymousId },
      ...(properties ? { properties } : {}),
    })
    if (queue.length > maxQueue) queue.splice(0, queue.length - maxQueue)
    if (queue.length >= flushAt) void flush()
  }

  /**
   * One batch over fetch. text/plain keeps it a "simple" request: no preflight round trip (the route reads JSON
   * whatever the type). A refusal that retrying cannot change (4xx but 429) drops the batch; anything else requeues it.
   */
  async function send(batch: QueuedEvent[]): Promise<boolean> {
    try {
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: JSON.stringify({ events: batch }) })
      if (response.ok) return true
      if (response.status >= 400 && response.status < 500 && response.status !== 429) return false
    } catch {} // offline, or an origin the key does not allow (the browser hides which)
    queue = [...batch, ...queue].slice(-maxQueue)
    return false
  }

  function flush(): Promise<boolean> {
    // One send at a time, so batches arrive in order; a flush during one waits for it, then sends what is left.
    sending = (sending ?? Promise.resolve(true)).then(async () => {
      let all = true
      while (queue.length) {
        const batch = queue.splice(0, MAX_BATCH)
        if (!(await send(batch))) {
          all = false
          break
        }
      }
      return all
    })
    return sending
  }

  /** The page is going away: hand everything to the browser, which sends beacons even after the page is gone. */
  function beacon(): void {
    if (typeof navigator === 'undefined' || typeof navigator.sendBeacon !== 'function') return void flush()
    while (queue.length) {
      let count = Math.min(queue.length, MAX_BATCH)
      let body = JSON.stringify({ events: queue.slice(0, count) })
      while (body.length * 3 > BEACON_BYTES && count > 1) {
        count = Math.max(1, Math.floor(count / 2))
        body = JSON.stringify({ events: queue.slice(0, count) })
      }
      if (!navigator.sendBeacon(url, body)) return // the browser's beacon budget is spent: keep the rest for the next page
      queue.splice(0, count)
    }
  }

  const timer = setInterval(() => void (queue.length && flush()), Math.max(100, options.flushIntervalMs ?? 5000))
  const onHidden = () => {
    if (document.visibilityState === 'hidden') beacon()
  }
  const hasPage = typeof window !== 'undefined' && typeof document !== 'undefined'
  if (hasPage) {
    window.addEventListener('pagehide', beacon)
    document.addEventListener('visibilitychange', onHidden)
  }

  return {
    capture: (event, properties) => enqueue(event, properties),
    identify(id, properties) {
      usersId = id
      enqueue('$identify', properties)
    },
    reset() {
      usersId = undefined
      anonymousId = newId()
      storage?.setItem(ANONYMOUS_ID_ITEM, anonymousId)
    },
    flush,
    get anonymousId() {
      return anonymousId
    },
    get queued() {
      return queue.length
    },
    close() {
      clearInterval(timer)
      if (hasPage) {
        window.removeEventListener('pagehide', beacon)
        document.removeEventListener('visibilitychange', onHidden)
      }
      beacon()
    },
  }
}
