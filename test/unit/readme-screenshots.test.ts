// The README's console pictures are made by the browser tests that check those views (test/console), so a picture of
// a view that no longer exists cannot stay: its test, and with it the name, would be gone.
import { describe, expect, test } from 'bun:test'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

const root = join(import.meta.dir, '../..')
const readme = readFileSync(join(root, 'README.md'), 'utf8')
const shown = [...readme.matchAll(/docs\/screenshots\/([a-z0-9-]+)\.png/g)].map((match) => match[1]!)
const taken = readdirSync(join(root, 'test/console')).filter((file) => file.endsWith('.test.ts'))
  .flatMap((file) => [...readFileSync(join(root, 'test/console', file), 'utf8').matchAll(/screenshot\(\w+, '([a-z0-9-]+)'\)/g)])
  .map((match) => match[1]!)

describe('README screenshots', () => {
  test('the README shows one picture of each console area', () => {
    for (const area of ['analytics', 'realtime', 'mail']) expect(shown.some((name) => name.startsWith(`${area}-`))).toBe(true)
  })

  test('every picture the README shows is in git and is taken by a console browser test', () => {
    for (const name of shown) {
      expect(existsSync(join(root, 'docs/screenshots', `${name}.png`))).toBe(true)
      expect(taken).toContain(name)
    }
  })

  test('every picture the browser tests take is shown in the README', () => {
    expect([...new Set(taken)].sort()).toEqual([...new Set(shown)].sort())
  })
})
