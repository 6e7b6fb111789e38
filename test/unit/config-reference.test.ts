// docs/configuration.md is generated from the configuration's declarations: the page and the declarations cannot drift,
// and no variable the config object reads is missing from the page.
import { expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { declarations } from '../../shared/config'
import { AREAS } from '../../shared/config/areas'
import { variablesOf } from '../../shared/config/read'
import { renderReference } from '../../shared/config/reference'

const page = join(import.meta.dir, '../../docs/configuration.md')

test('docs/configuration.md is what the declarations generate (after a change: bun run scripts/config-docs.ts)', () => {
  const committed = readFileSync(page, 'utf8')
  // Compared line by line, so a failure names the lines that differ rather than two 28 KB strings.
  const expected = renderReference().split('\n')
  const actual = committed.split('\n')
  const differing = expected.flatMap((line, i) => line === actual[i] ? [] : [`line ${i + 1}: expected ${JSON.stringify(line)}, found ${JSON.stringify(actual[i] ?? null)}`])
  expect(differing.slice(0, 5)).toEqual([])
  expect(actual.length).toBe(expected.length)
})

test('every variable the config object reads is in exactly one area of the reference, and every area variable is read', () => {
  const read = variablesOf(declarations).map((variable) => variable.name).sort()
  const documented = AREAS.flatMap((area) => Object.values(area.variables)).map((variable) => variable.name).sort()
  expect(documented).toEqual(read)
  expect(new Set(documented).size).toBe(documented.length)
})

test('the page lists each variable with its default, what it accepts and its meaning', () => {
  const lines = readFileSync(page, 'utf8').split('\n')
  const rowOf = (variable: string) => lines.find((line) => line.startsWith(`| \`${variable}\` |`))
  expect(rowOf('CACHE_TTL_MS')).toStartWith('| `CACHE_TTL_MS` | `5000` | an integer from 100 to 600000 | Longest a worker trusts')
  expect(rowOf('API_URL')).toStartWith('| `API_URL` | `http://127.0.0.1:<API_PORT>` | an http:// or https:// URL |')
  expect(rowOf('PLATFORM_SECRET_KEY')).toStartWith('| `PLATFORM_SECRET_KEY` | unset |')
  expect(rowOf('REALTIME_CACHE_TTL_MS')).toBe('| `REALTIME_CACHE_TTL_MS` | `CACHE_TTL_MS` |')
})
