// User passwords: argon2id (OWASP parameters: 19 MiB, 2 iterations, 1 lane).
import { hash, verify } from '@node-rs/argon2'

const ARGON2ID = 2 // Algorithm.Argon2id; the package declares it as a const enum, which Bun cannot import as a value
const OPTIONS = { algorithm: ARGON2ID, memoryCost: 19_456, timeCost: 2, parallelism: 1 }

export const hashPassword = (password: string) => hash(password, OPTIONS)

export async function verifyPassword(stored: string, password: string): Promise<boolean> {
  return verify(stored, password).catch(() => false)
}
