// The SDK's types are generated from the public OpenAPI document (scripts/sdk-types.ts): a route, schema or error code
// that changes without `bun run scripts/sdk-types.ts` fails here, so the committed shared/sdk/src/schema.ts never drifts.
import { expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { SCHEMA_FILE, sdkTypes } from '../../scripts/sdk-types'

test('shared/sdk/src/schema.ts is what scripts/sdk-types.ts generates from the document today', async () => {
  const fresh = await sdkTypes()
  expect(fresh).toContain('realtime_messages_publish: {')
  expect(readFileSync(SCHEMA_FILE, 'utf8') === fresh, 'stale: run bun run scripts/sdk-types.ts').toBe(true)
})
