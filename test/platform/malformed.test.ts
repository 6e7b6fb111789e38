// Throws malformed requests at every catalog route: each must get a 4xx in the platform's error shape, never a 500.
import { describe, expect, test } from 'bun:test'
import type { AnyOperation } from '../../shared/catalog/operation'
import { operations } from '../../services/api/catalog'
import { call, newProduct, type CallOptions } from '../helpers'

const owner = await newProduct()
const MEGA = 'x'.repeat(1_000_000)
const UNICODE_EDGES = ['\u0000', '\ud800', 'a\udfffb', '\u202e\u2066', '🏳️‍🌈'.repeat(50), 'ｆｕｌｌ', '\uFEFF', 'é'.normalize('NFD')]

/** Fills path parameters with plausible values: the caller's product, random ids, a name. */
function pathOf(op: AnyOperation, overrides: Record<string, string> = {}): string {
  const props = ((op.params as any)?.properties ?? {}) as Record<string, any>
  return op.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    if (name in overrides) return encodeURIComponent(overrides[name]!)
    if (name === 'productId') return owner.productId
    return props[name]?.format === 'uuid' ? crypto.randomUUID() : 'probe-name'
  })
}

function stringFieldsOf(op: AnyOperation): string[] {
  const props = ((op.body as any)?.properties ?? {}) as Record<string, any>
  return Object.entries(props).filter(([, s]) => s.type === 'string').map(([name]) => name)
}

async function expectClientError(op: AnyOperation, path: string, options: CallOptions) {
  const result = await call(op.method, path, { token: owner.token, productId: owner.productId, ...options })
  const label = `${op.id} ${op.method} ${path.slice(0, 80)} -> ${result.status} ${JSON.stringify(result.body).slice(0, 200)}`
  expect({ label, ok: result.status >= 400 && result.status < 500 }).toEqual({ label, ok: true })
  expect(typeof result.body?.error).toBe('string')
  expect(typeof result.body?.message).toBe('string')
  return result
}

const withBody = operations.filter((op) => op.body)

describe('malformed bodies on every route with a body', () => {
  for (const op of withBody) {
    test(`${op.id}`, async () => {
      const path = pathOf(op)
      const invalidJson = await expectClientError(op, path, { raw: '{"unterminated": ', headers: { 'content-type': 'application/json' } })
      expect(invalidJson.status).toBe(400)
      expect(invalidJson.body.error).toBe('invalid_json')
      for (const wrong of [[], 'text', 42, null, true]) {
        const r = await expectClientError(op, path, { body: wrong })
        expect(r.status).toBe(400)
        expect(r.body.fields[0].path).toBe('/body')
      }
      const extra = await expectClientError(op, path, { body: { definitely_not_a_field: 1 } })
      expect(extra.body.fields).toContainEqual({ path: '/body/definitely_not_a_field', message: 'is not an allowed field' })
      const required = ((op.body as any).required ?? []) as string[]
      if (required.length) {
        const missing = await expectClientError(op, path, { body: {} })
        expect(missing.body.fields.map((f: any) => f.path)).toEqual(expect.arrayContaining(required.map((r) => `/body/${r}`)))
      }
      for (const field of stringFieldsOf(op)) {
        const big = await expectClientError(op, path, { body: { [field]: MEGA } })
        expect([400, 413]).toContain(big.status)
        for (const edge of UNICODE_EDGES) {
          // Alone, so a well-formed edge case reaches the handler and storage: stored or refused, never a 500.
          const r = await call(op.method, path, { token: owner.token, productId: owner.productId, body: { [field]: edge } })
          expect({ field, edge, status: r.status < 500 }).toEqual({ field, edge, status: true })
          if (r.status >= 400) expect(typeof r.body.error).toBe('string')
        }
        await expectClientError(op, path, { body: { [field]: 12345 } })
        const nul = await expectClientError(op, path, { body: { [field]: 'a\u0000b' } })
        expect(nul.body.fields).toContainEqual({ path: `/body/${field}`, message: expect.stringContaining('NUL') })
      }
      // Nesting: 64 levels reach validation; deeper is refused before parsing (it would exhaust the stack).
      const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth)
      expect((await expectClientError(op, path, { raw: nested(64) })).body.error).toBe('validation_failed')
      expect((await expectClientError(op, path, { raw: nested(65) })).body.error).toBe('invalid_json')
      expect((await expectClientError(op, path, { raw: nested(100_000) })).body.error).toBe('invalid_json')
      expect((await expectClientError(op, path, { raw: `{"a":"[[[[\\"", "b": ${nested(70)}}` })).body.error).toBe('invalid_json')
      const tooLarge = await expectClientError(op, path, { raw: JSON.stringify({ pad: 'y'.repeat(1_100_000) }) })
      expect(tooLarge.status).toBe(413)
    })
  }
})

describe('malformed path and query values on every route', () => {
  for (const op of operations) {
    const params = Object.keys(((op.params as any)?.properties ?? {}) as object)
    const query = Object.keys(((op.query as any)?.properties ?? {}) as object)
    if (!params.length && !query.length) continue
    test(`${op.id}`, async () => {
      for (const name of params) {
        for (const bad of ['not-a-uuid', '%00', '..', 'a'.repeat(300), '\u202e']) {
          const r = await call(op.method, pathOf(op, { [name]: bad }), { token: owner.token, productId: owner.productId, body: {} })
          expect(r.status >= 400 && r.status < 500).toBe(true)
          expect(typeof r.body.error).toBe('string')
        }
      }
      for (const name of query) {
        const r = await call(op.method, `${pathOf(op)}?${name}=${'z'.repeat(5000)}&${name}=%FF`, { token: owner.token, productId: owner.productId })
        expect(r.status).toBeLessThan(500)
      }
    })
  }
})

describe('every authenticated route refuses a missing or malformed bearer token with 401', () => {
  for (const op of operations.filter((o) => o.auth !== 'none')) {
    test(`${op.id}`, async () => {
      for (const headers of [{} as Record<string, string>, { authorization: 'Bearer' }, { authorization: 'Bearer \u00ff\u00fe' }, { authorization: `Bearer pls_${'!'.repeat(43)}` }]) {
        const r = await call(op.method, pathOf(op), { headers, body: {} })
        expect(r.status).toBe(401)
        expect(r.body.error).toBe('unauthorized')
      }
    })
  }
})

test('unknown routes and methods are 404 in the error shape', async () => {
  for (const [method, path] of [['GET', '/nope'], ['POST', '/products/x/y/z'], ['PATCH', '/auth/login'], ['GET', '/%E0%A4%A']]) {
    const r = await call(method!, path!, { token: owner.token })
    expect(r.status).toBe(404)
    expect(r.body.error).toBe('not_found')
  }
})
