// bun run scripts/create-database.ts NAME — create database NAME on the server DATABASE_URL is on, unless it exists.
// scripts/test gives its cluster pass a database of its own this way, on an existing server as on its own one (no psql
// needed). Exits non-zero, saying why, when it cannot (a role without CREATEDB).
import postgres from 'postgres'
import { isPgError } from '../shared/db/error-codes'

const name = process.argv[2] ?? ''
// Quoted into the statement below: only names that need no quoting at all.
if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`bad database name: ${JSON.stringify(name)}`)

const sql = postgres(process.env.DATABASE_URL ?? '', { max: 1, onnotice: () => {} })
try {
  const [found] = await sql`select 1 from pg_database where datname = ${name}`
  if (!found) {
    try {
      await sql.unsafe(`create database "${name}"`)
      console.log(`created database ${name}`)
    } catch (error) {
      // duplicate_database: another run created it between the look and the create.
      if (!isPgError(error, 'duplicateDatabase')) throw error
    }
  }
} finally {
  await sql.end()
}
