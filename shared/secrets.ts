// Secrets the platform must be able to use (token signing keys, DKIM private keys) are stored sealed: AES-256-GCM
// envelope encryption under a master key from the environment, so reading the database is not enough to use them.
//
// Envelope, version 1 (all binary, one bytea column):
//   0x01 | master key id (8) | key nonce (12) | wrapped data key (32) | key tag (16) | data nonce (12) | data … | data tag (16)
// Each secret has its own random data key; only that 32-byte key is encrypted under the master key, so rotating the
// master key re-wraps 60 bytes per secret and never touches the data. `aad` (e.g. `realtime_signing_keys:<kid>`) is
// authenticated with both layers: a sealed value moved to another row does not open.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'
import { config } from './config'

const VERSION = 1
const ID_BYTES = 8
const NONCE_BYTES = 12
const TAG_BYTES = 16
const KEY_BYTES = 32
const HEADER_BYTES = 1 + ID_BYTES + NONCE_BYTES + KEY_BYTES + TAG_BYTES + NONCE_BYTES

/** The master keys a process holds: the current one seals, every one of them opens. */
export interface Keyring {
  current: Buffer
  /** By master key id (hex). */
  all: Map<string, Buffer>
}

const FORM = 'PLATFORM_SECRET_KEY must be 32 random bytes, base64 or base64url (43 or 44 characters) or hex (64 characters)'

/** Decodes one master key as written in the environment; throws naming the variable and the expected form. */
export function parseMasterKey(text: string, variable = 'PLATFORM_SECRET_KEY'): Buffer {
  const value = text.trim()
  const key = /^[0-9a-fA-F]{64}$/.test(value)
    ? Buffer.from(value, 'hex')
    : /^[A-Za-z0-9+/_-]{43}=?$/.test(value) ? Buffer.from(value, 'base64') : null
  if (!key || key.length !== KEY_BYTES) throw new Error(`${variable} is malformed: ${FORM.replace('PLATFORM_SECRET_KEY', variable)}`)
  return key
}

/** Id of a master key (hex, first 8 bytes of its SHA-256); without an argument, the current key's. */
export function masterKeyId(key: Buffer = requireSecretKey().current): string {
  return createHash('sha256').update(key).digest().subarray(0, ID_BYTES).toString('hex')
}

/** Builds a keyring from the environment's text (the current key, then older ones kept only to open). */
export function keyring(current: string | null, previous: readonly string[] = []): Keyring {
  if (!current) {
    throw new Error(`PLATFORM_SECRET_KEY is not set: ${FORM}. scripts/up and scripts/test generate one in .data/secret.key`)
  }
  const key = parseMasterKey(current)
  const all = new Map<string, Buffer>([[masterKeyId(key), key]])
  for (const old of previous) {
    const parsed = parseMasterKey(old, 'PLATFORM_SECRET_KEY_PREVIOUS')
    all.set(masterKeyId(parsed), parsed)
  }
  return { current: key, all }
}

let configured: Keyring | undefined

/** The process's keyring from config; throws a clear error when the key is missing or malformed. */
export function requireSecretKey(): Keyring {
  configured ??= keyring(config.secretKeys.current, config.secretKeys.previous)
  return configured
}

function encrypt(key: Buffer, plaintext: Buffer, aad: string): Buffer {
  const nonce = randomBytes(NONCE_BYTES)
  const cipher = createCipheriv('aes-256-gcm', key, nonce).setAAD(Buffer.from(aad, 'utf8'))
  return Buffer.concat([nonce, cipher.update(plaintext), cipher.final(), cipher.getAuthTag()])
}

function decrypt(key: Buffer, box: Buffer, aad: string): Buffer {
  const nonce = box.subarray(0, NONCE_BYTES)
  const tag = box.subarray(box.length - TAG_BYTES)
  const decipher = createDecipheriv('aes-256-gcm', key, nonce).setAAD(Buffer.from(aad, 'utf8'))
  decipher.setAuthTag(tag)
  return Buffer.concat([decipher.update(box.subarray(NONCE_BYTES, box.length - TAG_BYTES)), decipher.final()])
}

/** The envelope's head: version, the current master key's id, and the data key wrapped under that key. */
const head = (dataKey: Buffer, aad: string, keys: Keyring) =>
  Buffer.concat([Buffer.of(VERSION), Buffer.from(masterKeyId(keys.current), 'hex'), encrypt(keys.current, dataKey, aad)])

/**
 * Seals `plaintext` for the row named by `aad`.
 * @example const sealed = seal(secret, `realtime_signing_keys:${kid}`)
 */
export function seal(plaintext: Buffer, aad: string, keys: Keyring = requireSecretKey()): Buffer {
  const dataKey = randomBytes(KEY_BYTES)
  return Buffer.concat([head(dataKey, aad, keys), encrypt(dataKey, plaintext, aad)])
}

/** The master key id a sealed value was wrapped under (hex), for rotation. */
export const sealedUnder = (sealed: Buffer) => sealed.subarray(1, 1 + ID_BYTES).toString('hex')

function unwrap(sealed: Buffer, aad: string, keys: Keyring): Buffer {
  if (sealed.length < HEADER_BYTES + TAG_BYTES || sealed[0] !== VERSION) throw new Error('sealed secret: unknown format')
  const master = keys.all.get(sealedUnder(sealed))
  if (!master) throw new Error(`sealed secret: master key ${sealedUnder(sealed)} is not configured (PLATFORM_SECRET_KEY, PLATFORM_SECRET_KEY_PREVIOUS)`)
  try {
    return decrypt(master, sealed.subarray(1 + ID_BYTES, HEADER_BYTES - NONCE_BYTES), aad)
  } catch {
    throw new Error('sealed secret: does not open (tampered, or sealed for another row)')
  }
}

/** Opens a sealed value; throws when it was tampered with, sealed for another `aad`, or under an unknown master key. */
export function open(sealed: Buffer, aad: string, keys: Keyring = requireSecretKey()): Buffer {
  const dataKey = unwrap(sealed, aad, keys)
  try {
    return decrypt(dataKey, sealed.subarray(HEADER_BYTES - NONCE_BYTES), aad)
  } catch {
    throw new Error('sealed secret: does not open (tampered, or sealed for another row)')
  }
}

/** The same secret with its data key re-wrapped under the current master key (rotation; the data is not touched). */
export function rewrap(sealed: Buffer, aad: string, keys: Keyring = requireSecretKey()): Buffer {
  return Buffer.concat([head(unwrap(sealed, aad, keys), aad, keys), sealed.subarray(HEADER_BYTES - NONCE_BYTES)])
}
