// The request target every process routes and logs: hosts refused or accepted, and paths read the same whatever the Host.
import { describe, expect, test } from 'bun:test'
import { isValidHost, parseTarget, routable } from '../../shared/http/target'

describe('isValidHost', () => {
  test.each(['a', 'ab', 'localhost', 'api.example.com', 'my_service', '127.0.0.1', '127.0.0.1:4100', '[::1]', '[::1]:80', 'a-b.c:65535'])(
    'accepts %p', (host) => expect(isValidHost(host)).toBe(true))
  test.each(['', 'a b', 'a/b', 'a?b', 'a#b', 'a%b', 'a:', 'a:0', 'a:99999', 'a:x', '[', '[1:2]', '[zz]', 'ü.example', 'a\tb', '-a', 'a@b', 'a,b'])(
    'refuses %p', (host) => expect(isValidHost(host)).toBe(false))
  test('a process that has remembered no host yet refuses an empty one (the memo starts empty, not as "")', () => {
    const fresh = Bun.spawnSync(['bun', '-e', "import { isValidHost } from './shared/http/target'; console.log(isValidHost(''), isValidHost('a'), isValidHost(''))"],
      { cwd: `${import.meta.dir}/../..` })
    expect(fresh.stdout.toString().trim()).toBe('false true false')
  })
  test('a host remembered as valid answers alone: the one after it is checked in full, valid or not', () => {
    expect(isValidHost('a.example:80')).toBe(true)
    expect(isValidHost('a.example:80')).toBe(true)
    expect(isValidHost('a.example:99999')).toBe(false)
    expect(isValidHost('a.example:8')).toBe(true)
    expect(isValidHost('a.example:80 ')).toBe(false)
  })
})

describe('parseTarget', () => {
  test('splits host, path and query', () => {
    expect(parseTarget('http://api.example/products?limit=2', 'api.example')).toEqual({ host: 'api.example', path: '/products', search: '?limit=2' })
  })

  test('a short Host does not move the path (Elysia reads from character 11)', () => {
    expect(parseTarget('http://a/xy/openapi.json', 'a')).toEqual({ host: 'a', path: '/xy/openapi.json', search: '' })
  })

  test('no Host at all (HTTP/1.0) is served; an empty Host is refused', () => {
    expect(parseTarget('/healthz?x=1', null)).toEqual({ host: '', path: '/healthz', search: '?x=1' })
    expect(parseTarget('/healthz', '')).toBeNull()
  })

  test('a malformed Host header gives null, never a throw, even where the URL shows it decoded', () => {
    for (const host of ['a b', 'a?b', '[', 'a:99999']) expect(parseTarget(`http://${host}/x`, host)).toBeNull()
    expect(parseTarget('http://aA/x', 'a%41')).toBeNull()
    expect(parseTarget('http://a/x', 'a:')).toBeNull()
    expect(parseTarget('no scheme', 'x')).toBeNull()
  })
})

describe('routable', () => {
  test('a short or absent host is replaced so the router sees the real path; a normal one is left alone', async () => {
    const short = new Request('http://a/xy/openapi.json?q=1', { method: 'POST', body: 'payload' })
    const copy = routable(short, parseTarget(short.url, 'a')!)
    expect(copy.url).toBe('http://host.invalid/xy/openapi.json?q=1')
    expect(copy.method).toBe('POST')
    expect(await copy.text()).toBe('payload')
    const normal = new Request('http://api.example/products')
    expect(routable(normal, parseTarget(normal.url, 'api.example')!)).toBe(normal)
  })
})
