// bun run scripts/migrate.ts — apply pending migrations to DATABASE_URL.
import { sql } from '../shared/db/client'
import { migrate } from '../shared/db/migrate'

const applied = await migrate(sql)
console.log(applied.length ? `migrations applied: ${applied.join(', ')}` : 'migrations: up to date')
await sql.end()
