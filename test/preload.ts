// Runs once before the test files: the schema must be current before any test touches the database.
import { unboundedSql } from '../shared/db/client'
import { migrate } from '../shared/db/migrate'
import { sealPlainSecrets } from '../shared/db/seal-secrets'

process.env.LOG_REQUESTS ??= '0'
const sql = unboundedSql()
await migrate(sql)
await sealPlainSecrets(sql)
await sql.end()
