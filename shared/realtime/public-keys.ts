// Product API keys (rtk_): format, lookup digest and scope. Shared by the api (management) and public (verification).
import Type from 'typebox'
import { sha256 } from '../crypto'

export const PUBLIC_KEY_PREFIX = 'rtk_'

/**
 * What a key may do on the public routes. A key's scope is a non-empty set of these; the default is all of them.
 * - tokens:issue      POST /tokens/issue
 * - messages:publish  POST /messages
 * - history:read      GET  /channels/{channel}/history
 * - presence:read     GET  /channels/{channel}/presence
 * - channels:read     GET  /channels/{channel} (status/occupancy)
 */
export const PUBLIC_SCOPES = ['tokens:issue', 'messages:publish', 'history:read', 'presence:read', 'channels:read'] as const
export type PublicScope = (typeof PUBLIC_SCOPES)[number]
export const PublicScopeName = Type.Unsafe<PublicScope>(Type.Union(PUBLIC_SCOPES.map((s) => Type.Literal(s))))

/** The lookup digest: the environment is hashed in, so a key of one environment is unknown in another. */
export const publicKeyHash = (key: string, environment: string) => sha256(environment, key)
