// bun run scripts/rotate-secret-key.ts — after setting a new PLATFORM_SECRET_KEY (with the old one in
// PLATFORM_SECRET_KEY_PREVIOUS), re-wrap every sealed secret under the new key, in one transaction. Procedure:
// docs/architecture.md, "Secrets at rest".
import { unboundedSql } from '../shared/db/client'
import { rewrapSecrets } from '../shared/db/seal-secrets'

const sql = unboundedSql()
const changed = await rewrapSecrets(sql)
console.log(`secrets re-wrapped under the current PLATFORM_SECRET_KEY: ${changed}`)
await sql.end()
