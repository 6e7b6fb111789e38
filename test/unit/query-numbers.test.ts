// Path and query values arrive as text: a number field takes only a plain decimal, an integer field only an integer
// written as one, for every operation and public route alike (shared/catalog/validate.ts).
import { expect, test } from 'bun:test'
import Type from 'typebox'
import { checkPart } from '../../shared/catalog/validate'

const Query = Type.Object({ ms: Type.Optional(Type.Number({ exclusiveMinimum: 0 })), n: Type.Optional(Type.Integer({ minimum: 0 })) }, { additionalProperties: false })
const paths = (value: Record<string, unknown>, part: 'query' | 'params' = 'query') => checkPart(part, Query, value).errors.map((e) => e.path)

test('a number field refuses what Number() would read but no one writes as a decimal: hex, binary, exponents, signs, blanks, bare points', () => {
  for (const text of ['0x10', '0b11', '0o7', '+7', ' 5', '5 ', '1e3', '1e300', '.5', '5.', '', 'Infinity', '1_000']) {
    expect([text, paths({ ms: text })]).toEqual([text, ['/query/ms']])
    expect([text, paths({ ms: text }, 'params')]).toEqual([text, ['/path/ms']])
  }
})

test('a number field takes plain decimals, as text or as a JSON number (an MCP call)', () => {
  for (const [given, read] of [['16', 16], ['0.5', 0.5], ['60000', 60000], ['007.25', 7.25], [1e3, 1000], [0.5, 0.5]] as const) {
    expect(checkPart('query', Query, { ms: given })).toEqual({ value: { ms: read }, errors: [] })
  }
})

test('an integer field still takes only integers written as such', () => {
  for (const text of ['0x10', '+7', '1e3', '2.5', '007', ' 5', '']) expect([text, paths({ n: text })]).toEqual([text, ['/query/n']])
  expect(checkPart('query', Query, { n: '42' })).toEqual({ value: { n: 42 }, errors: [] })
})

test('bodies are JSON: their numbers are not read from text', () => {
  const Body = Type.Object({ ms: Type.Number() })
  expect(checkPart('body', Body, { ms: '16' }).errors.map((e) => e.path)).toEqual(['/body/ms'])
  expect(checkPart('body', Body, { ms: 1e300 }).errors).toEqual([])
})
