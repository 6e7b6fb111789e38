// Users, their personal organization, and login sessions.
import { publishInvalidation } from '../../../shared/cache/invalidation'
import { config } from '../../../shared/config'
import { looksLikeSecret, newSecret, sha256 } from '../../../shared/crypto'
import { sql } from '../../../shared/db/client'
import { ApiError, conflict } from '../../../shared/errors'
import { hashPassword, verifyPassword } from './passwords'
import { isPgError } from '../../../shared/db/error-codes'

export const SESSION_PREFIX = 'pls_'

export interface User {
  id: string
  email: string
  name: string | null
  createdAt: Date
}

const userFields = (row: Record<string, any>): User => ({ id: row.id, email: row.email, name: row.name, createdAt: row.created_at })

/** Creates a user and the organization they own. Email is unique case-insensitively. */
export async function signUp(input: { email: string; password: string; name?: string }) {
  const passwordHash = await hashPassword(input.password)
  return sql.begin(async (tx) => {
    const [existing] = await tx`select 1 from users where lower(email) = lower(${input.email})`
    if (existing) throw conflict('An account with this email already exists', [{ path: '/body/email', message: 'is already registered' }])
    const [user] = await tx`
      insert into users (email, name, password_hash) values (${input.email}, ${input.name ?? null}, ${passwordHash})
      returning id, email, name, created_at`
    const [organization] = await tx`
      insert into organizations (name) values (${`${input.name ?? input.email}'s organization`}) returning id, name`
    await tx`insert into organization_members (organization_id, user_id, role) values (${organization!.id}, ${user!.id}, 'owner')`
    return { user: userFields(user!), organization: { id: organization!.id as string, name: organization!.name as string } }
  }).catch((error) => {
    // Two sign-ups racing on one email: the unique index decides.
    if (isPgError(error, 'uniqueViolation')) throw conflict('An account with this email already exists', [{ path: '/body/email', message: 'is already registered' }])
    throw error
  })
}

export async function startSession(userId: string) {
  const token = newSecret(SESSION_PREFIX)
  const expiresAt = new Date(Date.now() + config.sessionTtlSeconds * 1000)
  await sql`insert into sessions (user_id, token_hash, expires_at) values (${userId}, ${sha256(token)}, ${expiresAt})`
  return { token, expiresAt }
}

export async function logIn(email: string, password: string) {
  const [row] = await sql`select id, email, name, created_at, password_hash from users where lower(email) = lower(${email})`
  // Verify against a dummy hash when the user is unknown so timing does not reveal which emails exist.
  const ok = await verifyPassword(row?.password_hash ?? DUMMY_HASH, password)
  if (!row || !ok) throw new ApiError('invalid_credentials', 'Email or password is incorrect')
  return { user: userFields(row), ...(await startSession(row.id)) }
}

/** Ends a login session; gateways hear it and close the console tokens it asked for (shared/realtime/revocations.ts). */
export async function endSession(sessionId: string): Promise<void> {
  const ended = await sql`update sessions set revoked_at = now() where id = ${sessionId} and revoked_at is null returning id`
  // Every gateway hears every announcement: a session already ended has nothing left to announce.
  if (ended.length > 0) await publishInvalidation({ kind: 'credential_ended', keyId: sessionId })
}

export async function getUser(userId: string): Promise<User | null> {
  const [row] = await sql`select id, email, name, created_at from users where id = ${userId}`
  return row ? userFields(row) : null
}

const DUMMY_HASH = await hashPassword('timing-equalizer')

/** When a login session token stops working, or null when it already has (unknown, revoked or expired). */
export async function liveSessionExpiry(token: string): Promise<Date | null> {
  if (!looksLikeSecret(token, SESSION_PREFIX)) return null
  const [row] = await sql`select expires_at from sessions where token_hash = ${sha256(token)} and revoked_at is null and expires_at > now()`
  return row ? (row.expires_at as Date) : null
}
