// bun run scripts/migrate.ts — apply pending migrations to DATABASE_URL, then seal any secret still stored in plain
// form (a data step SQL cannot do: the master key is not in the database).
import { unboundedSql } from '../shared/db/client'
import { migrate } from '../shared/db/migrate'
import { sealPlainSecrets } from '../shared/db/seal-secrets'

const sql = unboundedSql() // migrations may legitimately take longer than a request's deadline
const applied = await migrate(sql)
console.log(applied.length ? `migrations applied: ${applied.join(', ')}` : 'migrations: up to date')
const sealed = await sealPlainSecrets(sql)
if (sealed) console.log(`secrets sealed: ${sealed}`)
await sql.end()
