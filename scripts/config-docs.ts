// Writes docs/configuration.md from the configuration's declarations (shared/config/areas/): `bun run scripts/config-docs.ts`.
// test/unit/config-reference.test.ts fails when the committed page differs from what this writes.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { renderReference } from '../shared/config/reference'

const page = join(import.meta.dir, '..', 'docs', 'configuration.md')
writeFileSync(page, renderReference())
console.log(`wrote ${page}`)
