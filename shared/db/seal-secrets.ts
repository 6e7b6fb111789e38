// Data steps for secrets at rest that SQL migrations cannot do (the master key is not in the database): seal rows that
// still hold a plain secret, and re-wrap sealed rows under the current master key after a rotation.
import { type Keyring, requireSecretKey, rewrap, seal, sealedUnder, masterKeyId } from '../secrets'
import type { Sql } from './client'

/** The tables holding sealed secrets, with the row label their `aad` is built from and their sealed columns. */
const SEALED = [
  { table: 'realtime_signing_keys', id: 'kid', columns: ['secret_sealed'] },
  { table: 'mail_domains', id: 'id', columns: ['secret_sealed'] },
  // Both of an endpoint's secrets are sealed for its row (a rotation moves the current one to previous unopened).
  { table: 'webhook_endpoints', id: 'id', columns: ['secret_sealed', 'previous_secret_sealed'] },
] as const

export const aadOf = (table: string, id: string) => `${table}:${id}`

/** Seals every plain signing secret left from before migration 0003, in one transaction. Returns how many. */
export async function sealPlainSecrets(sql: Sql, keys?: Keyring): Promise<number> {
  return sql.begin(async (tx) => {
    const rows = await tx`select kid, secret from realtime_signing_keys where secret is not null for update`
    if (rows.length === 0) return 0
    const ring = keys ?? requireSecretKey() // only now: a database with nothing to seal needs no key
    for (const row of rows) {
      const sealed = seal(Buffer.from(row.secret), aadOf('realtime_signing_keys', row.kid), ring)
      await tx`update realtime_signing_keys set secret_sealed = ${sealed}, secret = null where kid = ${row.kid}`
    }
    return rows.length
  })
}

/** Re-wraps every sealed secret that is not under the current master key, in one transaction. Returns how many. */
export async function rewrapSecrets(sql: Sql, keys: Keyring = requireSecretKey()): Promise<number> {
  const current = masterKeyId(keys.current)
  return sql.begin(async (tx) => {
    let changed = 0
    for (const { table, id, columns } of SEALED) {
      for (const column of columns) {
        const rows = await tx`select ${tx(id)} as id, ${tx(column)} as sealed from ${tx(table)} where ${tx(column)} is not null for update`
        for (const row of rows) {
          const sealed = Buffer.from(row.sealed)
          if (sealedUnder(sealed) === current) continue
          await tx`update ${tx(table)} set ${tx(column)} = ${rewrap(sealed, aadOf(table, row.id), keys)} where ${tx(id)} = ${row.id}`
          changed++
        }
      }
    }
    return changed
  })
}
