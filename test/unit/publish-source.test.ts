// The publish scripts' source as Redis gets it (shared/realtime/broker.ts publishSource): every constant written in
// as a literal, none left as a name Lua would read as an undefined global (found only when that branch runs).
import { expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { HISTORY_CHANNEL_OVERHEAD_BYTES, POSITION_PARTS, PUBLISH_CONSTANTS, PUBLISH_LIBRARY, publishingParts, publishSource } from '../../shared/realtime/broker'
import PUBLISH_ONE_LUA from '../../shared/realtime/lua/publish-one.lua' with { type: 'text' }
import { PUBLISH_BATCH_PARTS } from '../../shared/realtime/publish-batch'
import { PUBLISH_REQUEST_PARTS } from '../../shared/realtime/publish-request'

const budgets = { fanoutRetentionMs: 60_000, fanoutMaxBytes: 8_388_608, historyMaxBytes: 67_108_864 }
/** Lua without its comments (`--` to the end of the line; the scripts have no `--` inside strings). */
const code = (source: string) => source.replace(/--.*$/gm, '')

test('every constant a publish script reads is written in as a literal, and each is read somewhere', () => {
  for (const parts of [publishingParts(PUBLISH_ONE_LUA), publishingParts(...PUBLISH_REQUEST_PARTS), publishingParts(...PUBLISH_BATCH_PARTS)]) {
    const source = code(publishSource(parts, budgets).join('\n'))
    for (const name of PUBLISH_CONSTANTS) expect(source).not.toMatch(new RegExp(`\\b${name}\\b`))
    // Nothing that looks like a constant is left either (a misspelt one), and no literal runs into `..`.
    expect(source.match(/\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b/g) ?? []).toEqual([])
    expect(source).not.toMatch(/\d\.\./)
  }
  const raw = code(publishingParts(...PUBLISH_REQUEST_PARTS).join('\n'))
  for (const name of PUBLISH_CONSTANTS) expect(raw).toMatch(new RegExp(`\\b${name}\\b`))
  expect(code(publishSource(publishingParts(PUBLISH_ONE_LUA), budgets).join('\n'))).toContain('8388608')
})

test('the position script has the fixed constants written in too: a channel costs it what it costs a publish', () => {
  const source = code(POSITION_PARTS.join('\n'))
  expect(source.match(/\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b/g) ?? []).toEqual([])
  expect(source).toContain(`return 4 * #channel + ${HISTORY_CHANNEL_OVERHEAD_BYTES} end`)
  expect(source).toContain('channel_cost(ARGV[3])')
})

test('a budget that is not a whole non-negative number is refused before it reaches a script', () => {
  for (const bad of [-1, 1.5, Number.NaN, 2 ** 60]) {
    expect(() => publishSource([...PUBLISH_LIBRARY], { ...budgets, historyMaxBytes: bad })).toThrow(/historyMaxBytes/)
  }
})

test('the history budget\'s one state is set whole by each open: no field of a call before survives into the next', () => {
  // A function library keeps hist_state from call to call (shared/redis-script.ts redisFunction).
  const source = code(readFileSync(join(import.meta.dir, '../../shared/realtime/lua/history-budget.lua'), 'utf8'))
  const fields = [...(/local hist_state = \{([^}]*)\}/.exec(source)?.[1] ?? '').matchAll(/(\w+) =/g)].map((m) => m[1]!)
  expect(fields.length).toBeGreaterThan(5)
  const open = source.indexOf('local function hist_open(')
  const body = source.slice(open, source.indexOf('\nend\n', open))
  expect(body).toContain('local s = hist_state')
  // Every field is written in the open function (alone, or in a multiple assignment), before it returns.
  const written = new Set([...body.matchAll(/^\s*((?:s\.\w+,\s*)*s\.\w+)\s*=[^=]/gm)].flatMap((m) => m[1]!.split(',').map((f) => f.trim().slice(2))))
  for (const field of fields) expect({ field, written: written.has(field) }).toEqual({ field, written: true })
})
