// The close codes the gateway uses are the protocol's, with the reconnect rule of each: they live in shared/ so the
// reference client reads the same table (shared/realtime/close-codes.ts).
import { isConsoleIdentity } from '../shared/realtime/console-identity'

export { DISCONNECTS, type Disconnect } from '../shared/realtime/close-codes'

/**
 * The reason of the 4001 that refuses or closes a token whose credential is revoked: a console token's ends with its
 * login session, its platform key or its user's membership, a product's token with the API key that issued it.
 */
export const revokedReason = (claims: { sub: string }) => (isConsoleIdentity(claims.sub) ? 'console access ended' : 'api key revoked')
