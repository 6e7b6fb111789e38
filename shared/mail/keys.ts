// Sending API keys (lmk_): their shape, scopes and lookup digest. Shared by the platform API (which creates and
// revokes them) and the public workers (which authenticate with them).
import Type from 'typebox'
import { sha256 } from '../crypto'

export const MAIL_KEY_PREFIX = 'lmk_'

export const MAIL_SCOPES = ['sending_access', 'full_access'] as const
export type MailScope = (typeof MAIL_SCOPES)[number]
export const MailScopeName = Type.Unsafe<MailScope>(Type.Union(MAIL_SCOPES.map((s) => Type.Literal(s)), {
  description: 'sending_access: send email and read the emails this key sent; full_access: also read every email and manage domains and templates',
}))

/** The only thing stored of a key: a one-way digest (the key has 256 random bits, so SHA-256 suffices; no salt needed). */
export const mailKeyHash = (key: string) => sha256('mail-api-key', key)
