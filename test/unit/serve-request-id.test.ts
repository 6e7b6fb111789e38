// serveApp's request ids: a route that asks for its id (requestIdOf) answers with it, and a response made by something
// else after the route asked (an error past the route's own handling) still carries that id, never none.
import { afterAll, expect, test } from 'bun:test'
import { Elysia } from 'elysia'
import { requestIdOf, serveApp } from '../../shared/http/serve'

const asked: string[] = []
const app = new Elysia()
  .get('/asks', ({ request }) => Response.json({ ok: true }, { headers: { 'x-request-id': requestIdOf(request) } }))
  .get('/asks-then-fails', ({ request }) => {
    asked.push(requestIdOf(request))
    throw new Error('failed after asking for the id')
  })
  .get('/never-asks', () => new Response('plain'))

const server = serveApp({ name: 'request-id-test', port: 0, app, maxRequestBodySize: 1024, logRequests: false })
const get = (path: string) => fetch(`http://127.0.0.1:${server.port}${path}`)

afterAll(() => server.stop(true))

test('a route that asks answers with its id; a response the route did not make gets one too', async () => {
  const first = await get('/asks')
  const second = await get('/asks')
  expect(first.status).toBe(200)
  expect(first.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/)
  expect(first.headers.get('x-request-id')).not.toBe(second.headers.get('x-request-id'))
  expect((await get('/never-asks')).headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/)
})

test('an error answered past the route after it asked carries the id the route was given', async () => {
  const response = await get('/asks-then-fails')
  expect(response.status).toBe(500)
  expect(asked).toHaveLength(1)
  expect(response.headers.get('x-request-id')).toBe(asked[0]!)
})
