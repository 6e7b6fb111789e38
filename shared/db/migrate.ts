// Applies pending shared/db/migrations/*.sql in name order inside one transaction, recorded in schema_migrations.
// A transaction-level advisory lock serializes concurrent runners, so two processes starting at once are safe.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Sql } from './client'

const MIGRATIONS_DIR = join(import.meta.dir, 'migrations')
const LOCK_ID = 727_001 // arbitrary, constant: the advisory lock key for migrations

/** Applies every pending migration, or with `through` only those whose name sorts at or before it (upgrade tests). */
export async function migrate(sql: Sql, options: { through?: string } = {}): Promise<string[]> {
  const files = readdirSync(MIGRATIONS_DIR).filter((f) => f.endsWith('.sql') && (!options.through || f <= options.through)).sort()
  const applied: string[] = []
  await sql.begin(async (tx) => {
    // Transaction-scoped lock: released on commit or rollback, even if this process dies.
    await tx`select pg_advisory_xact_lock(${LOCK_ID})`
    await tx`create table if not exists schema_migrations (name text primary key, applied_at timestamptz not null default now())`
    const done = new Set((await tx`select name from schema_migrations`).map((r) => r.name as string))
    for (const file of files) {
      if (done.has(file)) continue
      await tx.unsafe(readFileSync(join(MIGRATIONS_DIR, file), 'utf8'))
      await tx`insert into schema_migrations (name) values (${file})`
      applied.push(file)
    }
  })
  return applied
}
