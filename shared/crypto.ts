// Secrets and digests. High-entropy secrets are looked up by SHA-256 digest (one index hit);
// passwords use argon2id (in accounts). Digests are compared in constant time where compared in memory.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'

/** `prefix` + 43 URL-safe base64 characters (256 random bits). */
export function newSecret(prefix: string): string {
  return prefix + randomBytes(32).toString('base64url')
}

/** The visible part of a secret: its prefix plus the six characters after it. */
export function visiblePrefix(secret: string, prefix: string): string {
  return secret.slice(0, prefix.length + 6)
}

export function sha256(...parts: string[]): Buffer {
  const hash = createHash('sha256')
  for (const part of parts) hash.update(part).update('\0')
  return hash.digest()
}

export function sameDigest(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b)
}

/** Secret shape check before any lookup: prefix then exactly 43 base64url characters. */
export function looksLikeSecret(value: string, prefix: string): boolean {
  return value.length === prefix.length + 43 && value.startsWith(prefix) && /^[A-Za-z0-9_-]{43}$/.test(value.slice(prefix.length))
}
