// Revoked product API keys, as seen by gateways: a token names the key that issued it (`akid`), and revoking that key
// must end the token too. The database holds revocations for good; this Redis marker answers a gateway in one round
// trip and only needs to outlive the longest token a revoked key could have issued.
import { redis } from '../redis'
import { TOKEN_TTL_MAX } from './tokens'

const revokedKey = (keyId: string) => `rt:revoked-key:${keyId}`
/** Longest token lifetime plus clock-skew slack. */
const MARKER_SECONDS = TOKEN_TTL_MAX + 60

export async function markKeyRevoked(keyId: string): Promise<void> {
  await redis().set(revokedKey(keyId), '1', 'EX', MARKER_SECONDS)
}

/** True when the API key that issued a token has been revoked: a gateway refuses (4001) or closes such a connection. */
export async function isKeyRevoked(keyId: string): Promise<boolean> {
  return (await redis().exists(revokedKey(keyId))) === 1
}

/** Which of these API keys are revoked, in one round trip (a gateway's sweep over its live connections). */
export async function revokedAmong(keyIds: Iterable<string>): Promise<Set<string>> {
  const ids = [...new Set(keyIds)]
  if (ids.length === 0) return new Set()
  const pipeline = redis().pipeline()
  for (const id of ids) pipeline.exists(revokedKey(id))
  const replies = await pipeline.exec()
  // A pipeline reports each command's failure in its reply instead of rejecting: an unanswered check is not "not revoked".
  const failed = replies?.find(([error]) => error)
  if (!replies || failed) throw failed?.[0] ?? new Error('revocation check aborted')
  return new Set(ids.filter((_, i) => replies[i]![1] === 1))
}
