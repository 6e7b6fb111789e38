// bun run scripts/seed-dev.ts — once per .data/: a development user, product and platform key with every area.
// Writes them shell-sourceable to .data/dev.env and prints them. Re-running reuses what still works.
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { AREAS } from '../shared/catalog/operation'
import { config } from '../shared/config'
import { looksLikeSecret, newSecret, sha256 } from '../shared/crypto'
import { sql } from '../shared/db/client'
import { createPlatformKey, PLATFORM_KEY_PREFIX } from '../services/api/accounts/platform-keys'
import { createProduct, listProductsOfUser } from '../services/api/accounts/products'
import { hashPassword } from '../services/api/accounts/passwords'
import { signUp } from '../services/api/accounts/users'

const DATA_DIR = join(import.meta.dir, '..', '.data')
const ENV_FILE = join(DATA_DIR, 'dev.env')
const PRODUCT_NAME = 'Development'

function readEnvFile(): Record<string, string> {
  if (!existsSync(ENV_FILE)) return {}
  const entries = readFileSync(ENV_FILE, 'utf8').split('\n').map((line) => /^([A-Z_]+)=(?:'(.*)'|(.*))$/.exec(line.trim()))
  return Object.fromEntries(entries.filter((m) => m).map((m) => [m![1]!, m![2] ?? m![3] ?? '']))
}

async function ensureUser(email: string, remembered: string | undefined) {
  const password = remembered ?? newSecret('dev_').slice(0, 24)
  const [existing] = await sql`select id from users where lower(email) = lower(${email})`
  if (!existing) return { userId: (await signUp({ email, password, name: 'Developer' })).user.id, password }
  // The password is only known from dev.env; if that file was removed, set a new one (development data only).
  if (!remembered) await sql`update users set password_hash = ${await hashPassword(password)} where id = ${existing.id}`
  return { userId: existing.id as string, password }
}

async function ensureProduct(userId: string, remembered: string | undefined) {
  const products = await listProductsOfUser(userId)
  const product = products.find((p) => p.id === remembered) ?? products.find((p) => p.name === PRODUCT_NAME)
  return product?.id ?? (await createProduct(userId, { name: PRODUCT_NAME })).id
}

async function ensureKey(productId: string, userId: string, remembered: string | undefined) {
  if (remembered && looksLikeSecret(remembered, PLATFORM_KEY_PREFIX)) {
    const [row] = await sql`select 1 from platform_keys where key_hash = ${sha256(remembered)} and product_id = ${productId} and revoked_at is null`
    if (row) return remembered
  }
  return (await createPlatformKey(productId, { name: 'development (scripts/up)', areas: [...AREAS] }, userId)).key
}

const previous = readEnvFile()
const email = process.env.DEV_USER_EMAIL ?? previous.DEV_USER_EMAIL ?? 'dev@platform.localhost'
const { userId, password } = await ensureUser(email, previous.DEV_USER_EMAIL === email ? previous.DEV_USER_PASSWORD : undefined)
const productId = await ensureProduct(userId, previous.DEV_PRODUCT_ID)
const token = await ensureKey(productId, userId, previous.DEV_BEARER_TOKEN)

const env = {
  API_URL: config.apiUrl,
  PUBLIC_URL: config.publicUrl,
  GATEWAY_URL: config.gatewayUrl,
  DEV_USER_EMAIL: email,
  DEV_USER_PASSWORD: password,
  DEV_PRODUCT_ID: productId,
  DEV_BEARER_TOKEN: token,
}
const text = Object.entries(env).map(([k, v]) => `${k}='${v}'`).join('\n') + '\n'
mkdirSync(DATA_DIR, { recursive: true })
writeFileSync(ENV_FILE, text, { mode: 0o600 })
chmodSync(ENV_FILE, 0o600) // the mode above applies only when the file is created; it holds credentials
process.stdout.write(text)
await sql.end()
