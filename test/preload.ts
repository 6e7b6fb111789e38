// Runs once before the test files: the schema must be current before any test touches the database.
import { setDefaultTimeout } from 'bun:test'
import { sql } from '../shared/db/client'
import { migrate } from '../shared/db/migrate'

process.env.LOG_REQUESTS ??= '0'
// Tests that start worker processes or wait out a TTL need more than bun's default 5 s on a loaded 2-core machine.
setDefaultTimeout(20_000)
await migrate(sql)
