// Runs once before the test files: the schema must be current before any test touches the database.
import { sql } from '../shared/db/client'
import { migrate } from '../shared/db/migrate'

process.env.LOG_REQUESTS ??= '0'
await migrate(sql)
