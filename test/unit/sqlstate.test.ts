// PostgreSQL error codes live in one table (shared/db/error-codes.ts): what it answers for the errors postgres.js
// raises, and that no other source file spells a code as a literal again.
import { expect, test } from 'bun:test'
import { Glob } from 'bun'
import { join } from 'node:path'
import { isPgError, SQLSTATE, sqlStateOf } from '../../shared/db/error-codes'

const root = join(import.meta.dir, '../..')

test('isPgError names the code of a PostgreSQL error; another error, a connection failure or no error is none', () => {
  const duplicate = Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' })
  expect(isPgError(duplicate, 'uniqueViolation')).toBe(true)
  expect(isPgError(duplicate, 'foreignKeyViolation')).toBe(false)
  expect(isPgError(Object.assign(new Error('closed'), { code: 'CONNECTION_CLOSED' }), 'uniqueViolation')).toBe(false)
  expect(isPgError(null, 'uniqueViolation')).toBe(false)
  expect(isPgError(new Error('plain'), 'queryCanceled')).toBe(false)
  expect(sqlStateOf({ code: 40001 })).toBeUndefined()
})

test('every code in the table is a SQLSTATE (five digits or capitals), each once', () => {
  const codes = Object.values(SQLSTATE)
  for (const code of codes) expect(code).toMatch(/^[0-9A-Z]{5}$/)
  expect(new Set(codes).size).toBe(codes.length)
})

test('no source file outside the table spells one of its codes as a string literal', async () => {
  const literal = new RegExp(`['"\`](${Object.values(SQLSTATE).join('|')})['"\`]`)
  const offenders: string[] = []
  for (const dir of ['shared', 'services', 'gateway', 'scripts']) {
    for await (const file of new Glob(`${dir}/**/*.ts`).scan(root)) {
      if (file === 'shared/db/error-codes.ts') continue
      const text = await Bun.file(join(root, file)).text()
      text.split('\n').forEach((line, i) => {
        if (literal.test(line)) offenders.push(`${file}:${i + 1}: ${line.trim()}`)
      })
    }
  }
  expect(offenders).toEqual([])
})
