// Runs once before the test files: the schema must be current before any test touches the database.
import { setDefaultTimeout } from 'bun:test'
import { unboundedSql } from '../shared/db/client'
import { migrate } from '../shared/db/migrate'
import { sealPlainSecrets } from '../shared/db/seal-secrets'

process.env.LOG_REQUESTS ??= '0'
// Tests that start worker processes or wait out a TTL need more than bun's default 5 s on a loaded 2-core machine.
setDefaultTimeout(20_000)
const sql = unboundedSql()
await migrate(sql)
await sealPlainSecrets(sql)
await sql.end()
