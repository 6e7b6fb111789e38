// Cross-process cache invalidation over Redis pub/sub. A worker caches API keys and namespace policies for at most
// config.cache.ttlMs; a change published here drops the entry on every worker at once.
import { Cluster, type Redis } from 'ioredis'
import { randomUUID } from 'node:crypto'
import { config } from '../config'
import { describeError, log } from '../log'
import { dedicatedRedis, redis } from '../redis/client'

export const INVALIDATION_CHANNEL = 'platform:invalidate'
/** The member of a published message naming the announcement; listeners get the message without it. */
const ANNOUNCEMENT_ID = 'announcement'
/** How many recent announcement ids a subscriber remembers to drop repeats: far more than arrive within a bus relay. */
export const REMEMBERED_ANNOUNCEMENTS = 4096

/**
 * A subscriber only listens, so a link that dies without a reset (no RST ever arrives on a dead path) would look live
 * forever: caches would trust themselves until their TTL and a gateway would keep a revoked key's connections until
 * its revocation sweep. The subscription PINGs its link this often, and a PING unanswered this long replaces it.
 */
const LINK_CHECK_MS = 2000
const LINK_TIMEOUT_MS = Math.max(1000, config.redis.commandTimeoutMs)

export type Invalidation =
  // keyHash: hex digest of the key's lookup hash. `revoked` only when the key was revoked (gateways then close the
  // connections its tokens opened); a scope change only drops cached copies.
  | { kind: 'public_key'; keyHash: string; keyId: string; revoked?: true }
  | { kind: 'namespaces'; productId: string }
  | { kind: 'payload_storage'; productId: string }
  | { kind: 'mail_key'; keyHash: string } // hex digest of a Mail sending key (shared/mail/keys.ts)
  // A publishable capture key (ptk_) was revoked or its allowed origins changed; the key itself, public by design.
  | { kind: 'capture_key'; key: string }
  | { kind: 'signing_keys' } // a token signing key was added or retired: verifiers re-read their key set (./tokens.ts)
  // A login session ended (logout) or a platform key was revoked: gateways close the console tokens it asked for.
  | { kind: 'credential_ended'; keyId: string }
  // A user left an organization: gateways check the console tokens of that user's sessions again (which products they
  // reach changed), and close those that lost their product.
  | { kind: 'member_removed'; userId: string }

/**
 * Tells every worker to drop what the message names. Call it after the change has committed. A failed publish is
 * logged, not thrown: the change stands, and worker caches expire within config.cache.ttlMs without it.
 */
export async function publishInvalidation(message: Invalidation): Promise<void> {
  // Workers key their caches by lower-case product id.
  const canonical = 'productId' in message ? { ...message, productId: message.productId.toLowerCase() } : message
  // The id lets a subscriber that hears one announcement from several nodes (below) act on it once.
  const text = JSON.stringify({ ...canonical, [ANNOUNCEMENT_ID]: randomUUID() })
  const client = redis()
  if (client instanceof Cluster) {
    // A node relays a message to the others over the cluster bus only after it answers: one PUBLISH returning says
    // nothing of workers subscribed elsewhere, and the next request could beat the message there. So every node is
    // told, replicas too (a subscriber's seed node may be one; they accept PUBLISH), and a subscriber acts on each
    // announcement once (onInvalidation). Every node's fence (publishFenced) is waited for, since that is what makes
    // the change seen at once everywhere: a node that hangs costs the caller at most twice the command timeout. The
    // change counts as announced once any node has taken the PUBLISH.
    // Replicas' connections are made lazily (reads go to masters), so one this process never used waits ('wait'): it is
    // connected now, within the connect timeout, since a subscriber's seed node may be that replica.
    const nodes = client.nodes('all').filter((node) => node.status === 'ready' || node.status === 'wait')
    let announced = false
    await Promise.allSettled(nodes.map(async (node) => {
      if (node.status === 'wait') await node.connect()
      await publishFenced(node, text, () => (announced = true))
    }))
    if (announced) return // a fence that failed only waited less; publishing again would only repeat it
  }
  let published = false
  try {
    await publishFenced(client, text, () => (published = true))
  } catch (error) {
    log('warn', published ? 'invalidation published, its fence unanswered' : 'invalidation not published', { kind: message.kind, ...describeError(error) })
  }
}

/**
 * PUBLISH, then a PING on the same connection once it has answered (`published` is called in between). Redis queues
 * the subscribers' copies and the publisher's reply in one pass and writes the most recently queued client first: the
 * reply can leave before the copies, and a loaded host can pause Redis between those writes long enough for the
 * caller's next request to reach a worker that has not heard. The PING is read in a later pass than the one that wrote
 * the copies, so its answer means each copy has been written to its subscriber's socket, unless that subscriber's link
 * was backed up (replies still unsent: the copy waits for the socket), which a link carrying only these rare messages
 * is not. It narrows the window to the network between Redis and the worker; it does not close it.
 */
async function publishFenced(node: Pick<Redis, 'publish' | 'ping'>, text: string, published: () => void = () => {}): Promise<void> {
  await node.publish(INVALIDATION_CHANNEL, text)
  published()
  await node.ping()
}

/**
 * Subscribes on a dedicated connection; resolves once the subscription is active (rejects, leaving nothing open, if it
 * cannot be made). `onLive(false)` is called when the connection drops — messages published meanwhile are lost, so a
 * cache must stop trusting itself — and `onLive(true)` once it is subscribed again after reconnecting.
 */
export async function onInvalidation(
  listener: (message: Invalidation) => void,
  onLive: (live: boolean) => void = () => {},
): Promise<() => Promise<void>> {
  const subscriber = dedicatedRedis('invalidation')
  let stopped = false
  const seen = new Set<string>() // insertion-ordered: the oldest id is dropped first
  subscriber.on('message', (_channel: string, text: string) => {
    try {
      const { [ANNOUNCEMENT_ID]: id, ...message } = JSON.parse(text) as Invalidation & { [ANNOUNCEMENT_ID]?: string }
      if (typeof id === 'string') {
        if (seen.has(id)) return
        seen.add(id)
        if (seen.size > REMEMBERED_ANNOUNCEMENTS) seen.delete(seen.values().next().value!)
      }
      listener(message as Invalidation)
    } catch {}
  })
  subscriber.on('close', () => {
    if (!stopped) onLive(false)
  })
  // After a reconnect: subscribe again explicitly and only then report live (the connection is down again if it fails).
  subscriber.on('ready', () => {
    subscriber.subscribe(INVALIDATION_CHANNEL).then(() => !stopped && onLive(true), () => {})
  })
  try {
    await subscriber.subscribe(INVALIDATION_CHANNEL)
  } catch (error) {
    stopped = true
    subscriber.disconnect()
    throw error
  }
  // One PING at a time; its round number tells the awaited answer from a late one (resent after a reconnect), which
  // must not clear a newer round's check.
  let awaited = 0
  let rounds = 0
  const checkLink = () => {
    if (awaited || subscriber.status !== 'ready') return
    const round = (awaited = ++rounds)
    const dead = setTimeout(() => {
      if (awaited !== round) return
      awaited = 0
      log('warn', 'invalidation link answers nothing; reconnecting (caching off until resubscribed)')
      subscriber.disconnect(true) // its close turns the caches off; the reconnect subscribes and turns them on again
    }, LINK_TIMEOUT_MS)
    const answered = () => {
      if (awaited !== round) return
      awaited = 0
      clearTimeout(dead)
    }
    subscriber.ping().then(answered, answered)
  }
  const linkCheck = setInterval(checkLink, LINK_CHECK_MS)
  return async () => {
    stopped = true
    clearInterval(linkCheck)
    subscriber.disconnect() // not QUIT: on a link that died silently it would wait forever, and a subscriber owes nothing
  }
}
