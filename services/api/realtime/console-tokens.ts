// Delegated tokens for the platform's own callers (the console's channel inspector): the subject and the revocable
// credential come from the principal, never from the request, so no caller can act as one of the product's end users.
import type { Context } from '../../../shared/catalog/operation'
import { consoleSubject } from '../../../shared/realtime/console-identity'
import { issueToken, type IssueResult } from '../../../shared/realtime/token-issue'
import type { TokenChannel } from '../../../shared/realtime/tokens'

/** Channels one console token may name, and its lifetime bounds: short, for an inspector open in a browser tab. */
export const CONSOLE_TOKEN_CHANNELS_MAX = 10
export const CONSOLE_TOKEN_TTL_MIN = 60
export const CONSOLE_TOKEN_TTL_MAX = 600
export const CONSOLE_TOKEN_TTL_DEFAULT = 300

/**
 * Who the token speaks for: `console:<userId>` for a login session, `console:<platformKeyId>` for a platform key
 * (shared/realtime/console-identity.ts), so a product's backend can never issue a token that looks like the console,
 * nor the console one that looks like an end user.
 * The token's `akid` is the session or the platform key: the gateway refuses and closes tokens whose credential ended,
 * or whose session's user no longer reaches the product (shared/realtime/revocations.ts), so logging out, revoking the
 * key or removing the member ends the inspector's connections too, at once where announced.
 */
export function consoleIdentity(ctx: Context): { subject: string; credentialId: string } {
  const principal = ctx.principal
  if (!principal) throw new Error('console token without a principal')
  return principal.kind === 'session'
    ? { subject: consoleSubject(principal.userId), credentialId: principal.sessionId }
    : { subject: consoleSubject(principal.keyId), credentialId: principal.keyId }
}

/** Issues a console token: the public issue's narrowing (namespace policy, grants), the subject of the principal. */
export function issueConsoleToken(productId: string, ctx: Context, channels: TokenChannel[], ttlSeconds?: number): Promise<IssueResult> {
  const { subject, credentialId } = consoleIdentity(ctx)
  return issueToken(productId, credentialId, { subject, channels, ttlSeconds: ttlSeconds ?? CONSOLE_TOKEN_TTL_DEFAULT })
}
