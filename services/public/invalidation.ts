// This worker's caches (Realtime API keys, namespace policies, Mail sending keys, capture keys) and the messages that drop their entries.
import { listenForInvalidations, type InvalidationListener } from '../../shared/cache/invalidation-listener'
import { policyCache } from '../../shared/realtime/policies'
import { captureKeyCache } from './capture/key-auth'
import { mailKeyCache } from './mail/key-auth'
import { keyCache } from './realtime/key-auth'

let listener: InvalidationListener | undefined

/** True while this worker is subscribed to invalidations (its caches are on); part of /readyz. */
export const invalidationsLive = () => listener?.live() ?? false

/** Starts listening (in the background); returns the function that stops it. */
export function listenForCacheInvalidations(): () => Promise<void> {
  listener = listenForInvalidations({
    caches: [keyCache, policyCache, mailKeyCache, captureKeyCache],
    onMessage: (message) => {
      if (message.kind === 'public_key') keyCache.forget(message.keyHash)
      else if (message.kind === 'mail_key') mailKeyCache.forget(message.keyHash)
      else if (message.kind === 'capture_key') captureKeyCache.forget(message.key)
      else if (message.kind === 'namespaces' || message.kind === 'payload_storage') policyCache.forget(message.productId)
      // Public workers sign tokens, they do not verify them: signing keys and ended console credentials are the gateways'.
    },
  })
  return listener.stop
}
