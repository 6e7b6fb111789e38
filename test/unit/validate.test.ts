// The edge validation (shared/catalog/validate.ts) on the paths its fast checks take: arrays of strings that must hold
// each item once (checked with a Set, not TypeBox's hashing), and strings PostgreSQL cannot store.
import { expect, test } from 'bun:test'
import { Type } from 'typebox'
import type { ApiError } from '../../shared/errors'
import { validateInput } from '../../shared/catalog/validate'
import { BroadcastBody, TokenIssueBody } from '../../shared/realtime/request-schemas'

const fieldsOf = (run: () => unknown) => {
  try {
    run()
  } catch (error) {
    return (error as ApiError).extra
  }
  return 'valid'
}

test('a repeated op in a token channel, and a repeated broadcast channel, are refused naming the field as before', () => {
  const token = (ops: string[]) => ({ subject: 'ada', channels: [{ name: 'chat:1', ops: ['subscribe'] }, { name: 'chat:2', ops }] })
  expect(fieldsOf(() => validateInput({ body: TokenIssueBody }, { body: token(['subscribe', 'history']) }))).toBe('valid')
  expect(fieldsOf(() => validateInput({ body: TokenIssueBody }, { body: token(['history', 'subscribe', 'history']) })))
    .toEqual({ fields: [{ path: '/body/channels/1/ops', message: expect.stringMatching(/unique|duplicate/) }] })
  const broadcast = (channels: string[]) => ({ channels, data: { text: 'hi' } })
  expect(fieldsOf(() => validateInput({ body: BroadcastBody }, { body: broadcast(['chat:1', 'chat:2']) }))).toBe('valid')
  expect(fieldsOf(() => validateInput({ body: BroadcastBody }, { body: broadcast(['chat:1', 'chat:2', 'chat:1']) })))
    .toEqual({ fields: [{ path: '/body/channels', message: expect.stringMatching(/unique|duplicate/) }] })
})

test('uniqueness on arrays of other items stays TypeBox\'s own, and an optional array left out is valid', () => {
  const schema = Type.Object({ tags: Type.Optional(Type.Array(Type.String(), { uniqueItems: true })), points: Type.Array(Type.Object({ x: Type.Number() }), { uniqueItems: true }) })
  expect(fieldsOf(() => validateInput({ body: schema }, { body: { points: [{ x: 1 }, { x: 2 }] } }))).toBe('valid')
  expect(fieldsOf(() => validateInput({ body: schema }, { body: { points: [{ x: 1 }, { x: 1 }] } })))
    .toEqual({ fields: [{ path: '/body/points', message: expect.stringMatching(/unique|duplicate/) }] })
  expect(fieldsOf(() => validateInput({ body: schema }, { body: { tags: ['a', 'b', 'a'], points: [] } })))
    .toEqual({ fields: [{ path: '/body/tags', message: expect.stringMatching(/unique|duplicate/) }] })
})

test('a refinement on an array of unique strings, or on the object holding one, still refuses what it refuses', () => {
  const refused = (path: string) => ({ fields: [{ path, message: 'Refine Error' }] }) // TypeBox's own message
  const inner = Type.Object({ tags: Type.Refine(Type.Array(Type.String(), { uniqueItems: true }), (tags) => !tags.includes('admin')) })
  expect(fieldsOf(() => validateInput({ body: inner }, { body: { tags: ['a', 'b'] } }))).toBe('valid')
  expect(fieldsOf(() => validateInput({ body: inner }, { body: { tags: ['a', 'admin'] } }))).toEqual(refused('/body/tags'))
  const outer = Type.Refine(Type.Object({ tags: Type.Array(Type.String(), { uniqueItems: true }) }), (body) => body.tags.length < 3)
  expect(fieldsOf(() => validateInput({ body: outer }, { body: { tags: ['a', 'b'] } }))).toBe('valid')
  expect(fieldsOf(() => validateInput({ body: outer }, { body: { tags: ['a', 'b', 'c'] } }))).toEqual(refused('/body'))
  expect(fieldsOf(() => validateInput({ body: outer }, { body: { tags: ['a', 'a'] } })))
    .toEqual({ fields: [{ path: '/body/tags', message: expect.stringMatching(/unique|duplicate/) }] })
})

test('a NUL, a lone surrogate, in a value or a field name, anywhere in the body, is still named', () => {
  const schema = Type.Object({ data: Type.Unknown() })
  expect(fieldsOf(() => validateInput({ body: schema }, { body: { data: { a: ['ok', { b: 'fine' }] } } }))).toBe('valid')
  expect(fieldsOf(() => validateInput({ body: schema }, { body: { data: { a: ['ok', { b: 'x\u0000' }] } } })))
    .toEqual({ fields: [{ path: '/body/data/a/1/b', message: 'must be valid Unicode text without NUL characters' }] })
  expect(fieldsOf(() => validateInput({ body: schema }, { body: { data: { '\ud800': 1 } } })))
    .toEqual({ fields: [{ path: '/body/data/\ud800', message: 'field names must be valid Unicode' }] })
})
