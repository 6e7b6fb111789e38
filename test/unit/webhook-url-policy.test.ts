// Webhook URL rules: the address classes (every special-purpose range, IPv6 forms carrying an IPv4 address), the
// production policy (https, public hosts only) and the one tests and development run with (private URLS allowed).
import { describe, expect, test } from 'bun:test'
import { checkWebhookUrl, classifyAddress, isLocalhostName, PORT_RULE, SERVICE_PORTS, type UrlPolicy, webhookPortAllowed } from '../../shared/webhooks/url-policy'

const names: Record<string, string[]> = {
  'public.example': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
  'mixed.example': ['93.184.215.14', '10.0.0.7'],
  'rebind.example': ['127.0.0.1'],
  'metadata.example': ['169.254.169.254'],
  'private6.example': ['fd00::1'],
}
const resolve = async (host: string) => names[host] ?? []
const production: UrlPolicy = { allowPrivate: false, dnsTimeoutMs: 200, resolve }
const development: UrlPolicy = { allowPrivate: true, dnsTimeoutMs: 200, resolve }

describe('classifyAddress', () => {
  test.each([
    ['8.8.8.8', 'public'], ['93.184.215.14', 'public'], ['1.1.1.1', 'public'], ['172.32.0.1', 'public'], ['100.128.0.1', 'public'],
    ['127.0.0.1', 'loopback'], ['127.255.255.254', 'loopback'],
    ['10.0.0.1', 'private'], ['172.16.0.1', 'private'], ['172.31.255.255', 'private'], ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local'], ['169.254.0.1', 'link-local'],
    ['100.64.0.1', 'cgnat'], ['100.127.255.255', 'cgnat'],
    ['0.0.0.0', 'unspecified'], ['0.1.2.3', 'reserved'],
    ['224.0.0.1', 'multicast'], ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'], ['255.255.255.255', 'reserved'], ['192.0.0.8', 'reserved'], ['192.88.99.1', 'reserved'],
    ['192.0.2.1', 'documentation'], ['198.51.100.7', 'documentation'], ['203.0.113.9', 'documentation'],
    ['198.18.0.1', 'benchmark'], ['198.19.255.255', 'benchmark'],
  ])('IPv4 %p is %p', (ip, kind) => expect(classifyAddress(ip)).toBe(kind as any))

  test.each([
    ['2606:2800:21f:cb07:6820:80da:af6b:8b2c', 'public'], ['2001:4860:4860::8888', 'public'],
    ['::', 'unspecified'], ['::1', 'loopback'], ['[::1]', 'loopback'],
    ['fe80::1', 'link-local'], ['febf::1', 'link-local'], ['fe80::1%eth0', 'link-local'],
    ['fc00::1', 'unique-local'], ['fd12:3456::1', 'unique-local'],
    ['ff02::1', 'multicast'], ['2001:db8::1', 'documentation'], ['3fff::1', 'documentation'],
    ['2001:2::1', 'benchmark'], ['2001::1', 'reserved'], ['100::1', 'reserved'], ['fec0::1', 'reserved'], ['4000::1', 'reserved'],
    // IPv4-mapped, -compatible, NAT64 and 6to4 forms are classified by the IPv4 address they carry
    ['::ffff:127.0.0.1', 'loopback'], ['::ffff:7f00:1', 'loopback'], ['[::ffff:7f00:1]', 'loopback'],
    ['::ffff:169.254.169.254', 'link-local'], ['::ffff:10.1.2.3', 'private'], ['::ffff:8.8.8.8', 'public'],
    ['::127.0.0.1', 'loopback'], ['::7f00:1', 'loopback'], ['::a9fe:a9fe', 'link-local'],
    ['64:ff9b::10.0.0.1', 'private'], ['64:ff9b::8.8.8.8', 'public'], ['64:ff9b:1::1', 'private'],
    ['2002:7f00:1::1', 'loopback'], ['2002:808:808::1', 'public'],
  ])('IPv6 %p is %p', (ip, kind) => expect(classifyAddress(ip)).toBe(kind as any))

  test.each(['example.com', 'localhost', '1.2.3', '1.2.3.4.5', '::1::2', ''])('%p is not an address', (text) => {
    expect(classifyAddress(text)).toBeNull()
  })

  test('localhost names are loopback names, with or without the final dot', () => {
    for (const host of ['localhost', 'LOCALHOST', 'localhost.', 'api.localhost', 'a.b.localhost.']) expect(isLocalhostName(host)).toBe(true)
    for (const host of ['localhost.example', 'notlocalhost', 'localhostx']) expect(isLocalhostName(host)).toBe(false)
  })
})

describe('checkWebhookUrl in production (private URLs not allowed)', () => {
  const refusal = async (url: string) => {
    const verdict = await checkWebhookUrl(url, production)
    return verdict.ok ? verdict : { status: verdict.status, reason: verdict.reason }
  }

  test('accepts https to a public address or a name whose every address is public, normalized', async () => {
    expect(await checkWebhookUrl('https://public.example/hooks?x=1', production)).toEqual({ ok: true, url: 'https://public.example/hooks?x=1' })
    expect(await checkWebhookUrl('https://8.8.8.8:8443/in', production)).toEqual({ ok: true, url: 'https://8.8.8.8:8443/in' })
    expect(await checkWebhookUrl('HTTPS://Public.Example', production)).toEqual({ ok: true, url: 'https://public.example/' })
  })

  test('refuses http, other schemes and text that is not a URL (400)', async () => {
    expect(await refusal('http://public.example/')).toEqual({ status: 400, reason: 'must be https' })
    expect(await refusal('ftp://public.example/')).toEqual({ status: 400, reason: 'must be https' })
    expect(await refusal('javascript:alert(1)')).toEqual({ status: 400, reason: 'must be https' })
    expect(await refusal('/relative/path')).toEqual({ status: 400, reason: 'is not an absolute URL' })
  })

  test('refuses userinfo, a fragment, and more than 2048 bytes (400)', async () => {
    expect(await refusal('https://user:pass@public.example/')).toMatchObject({ status: 400, reason: expect.stringContaining('user name') })
    expect(await refusal('https://user@public.example/')).toMatchObject({ status: 400 })
    expect(await refusal('https://public.example/#frag')).toMatchObject({ status: 400, reason: expect.stringContaining('fragment') })
    expect(await refusal('https://public.example/#')).toMatchObject({ status: 400 })
    const long = 'https://public.example/' + 'a'.repeat(2048 - 23)
    expect((await checkWebhookUrl(long, production)).ok).toBe(true)
    expect(await refusal(long + 'a')).toMatchObject({ status: 400, reason: expect.stringContaining('2048 bytes') })
    // bytes, not characters: 1000 two-byte characters with the rest are over
    expect(await refusal('https://public.example/' + 'é'.repeat(1020))).toMatchObject({ status: 400, reason: expect.stringContaining('2048 bytes') })
  })

  test.each([
    'https://127.0.0.1/', 'https://10.0.0.1/', 'https://172.16.5.4/', 'https://192.168.0.10/', 'https://169.254.169.254/latest/meta-data',
    'https://100.64.0.1/', 'https://0.0.0.0/', 'https://224.0.0.1/', 'https://192.0.2.1/', 'https://198.18.0.1/', 'https://[::1]/',
    'https://[::]/', 'https://[fe80::1]/', 'https://[fd00::1]/', 'https://[::ffff:127.0.0.1]/', 'https://[::ffff:169.254.169.254]/',
    // WHATWG URL reads these hosts as IPv4 addresses: decimal, hexadecimal, octal, short forms
    'https://2130706433/', 'https://0x7f.1/', 'https://017700000001/', 'https://127.1/', 'https://0xa9fea9fe/',
  ])('refuses the address in %p (422)', async (url) => {
    expect(await refusal(url)).toMatchObject({ status: 422, reason: expect.stringMatching(/is a [a-z-]+ address, not a public one$/) })
  })

  test('refuses localhost names without resolving them (422)', async () => {
    for (const url of ['https://localhost/', 'https://localhost./', 'https://api.localhost:8443/']) {
      expect(await refusal(url)).toMatchObject({ status: 422, reason: expect.stringContaining('loopback name') })
    }
  })

  test('refuses a name when ANY of its addresses is not public, or when it does not resolve (422), with one answer that names no address', async () => {
    for (const host of ['mixed.example', 'rebind.example', 'metadata.example', 'private6.example', 'nowhere.example']) {
      expect(await refusal(`https://${host}/`)).toEqual({ status: 422, reason: `its host ${host} must resolve, within ${production.dnsTimeoutMs} ms, to public addresses only` })
    }
  })

  test('refuses a name whose resolution outlasts the timeout (422)', async () => {
    const slow: UrlPolicy = { ...production, dnsTimeoutMs: 20, resolve: () => new Promise((done) => setTimeout(() => done(['8.8.8.8']), 500)) }
    const verdict = await checkWebhookUrl('https://slow.example/', slow)
    expect(verdict).toEqual({ ok: false, status: 422, reason: 'its host slow.example must resolve, within 20 ms, to public addresses only' })
  })
})

describe('checkWebhookUrl with WEBHOOK_ALLOW_PRIVATE_URLS (development, tests)', () => {
  test('accepts http, loopback, private and unique-local addresses, and localhost names', async () => {
    for (const url of ['http://127.0.0.1:8080/hook', 'http://10.0.0.1/', 'https://192.168.1.2/', 'http://[::1]:9001/', 'http://[fd00::1]/',
      'http://localhost:3000/', 'http://rebind.example/', 'http://private6.example/']) {
      expect(await checkWebhookUrl(url, development)).toMatchObject({ ok: true })
    }
    expect(await checkWebhookUrl('http://2130706433:8081/x', development)).toEqual({ ok: true, url: 'http://127.0.0.1:8081/x' })
  })

  test('still refuses link-local (the metadata address), unspecified, multicast, CGNAT and reserved addresses', async () => {
    for (const url of ['http://169.254.169.254/', 'http://[::ffff:169.254.169.254]/', 'http://0.0.0.0/', 'http://224.0.0.1/',
      'http://100.64.0.1/', 'http://240.0.0.1/', 'http://metadata.example/', 'http://[fe80::1]/']) {
      expect(await checkWebhookUrl(url, development)).toMatchObject({ ok: false, status: 422 })
    }
  })

  test('still refuses other schemes, userinfo and fragments', async () => {
    expect(await checkWebhookUrl('ftp://127.0.0.1/', development)).toEqual({ ok: false, status: 400, reason: 'must be https or http' })
    expect(await checkWebhookUrl('http://a:b@127.0.0.1/', development)).toMatchObject({ ok: false, status: 400 })
    expect(await checkWebhookUrl('http://127.0.0.1/#x', development)).toMatchObject({ ok: false, status: 400 })
  })
})

describe('ports: 443, 80, or one from 1024 up that no known service uses, in every deployment', () => {
  test('the ports a receiver listens on are accepted, the default ports included', async () => {
    for (const port of [80, 443, 1024, 3000, 5000, 8000, 8080, 8443, 9001, 32768, 65535]) expect([port, webhookPortAllowed(port)]).toEqual([port, true])
    expect(await checkWebhookUrl('https://public.example:443/', production)).toEqual({ ok: true, url: 'https://public.example/' })
    expect(await checkWebhookUrl('https://public.example:80/', production)).toEqual({ ok: true, url: 'https://public.example:80/' })
    expect(await checkWebhookUrl('http://127.0.0.1:41234/hook', development)).toEqual({ ok: true, url: 'http://127.0.0.1:41234/hook' })
  })

  test('system ports and known services are refused (400) before any lookup, naming the rule and the port', async () => {
    for (const port of [0, 1, 21, 22, 23, 25, 53, 110, 143, 445, 587, 993, 1023, ...SERVICE_PORTS.keys()]) expect([port, webhookPortAllowed(port)]).toEqual([port, false])
    const lookups: string[] = []
    const counting: UrlPolicy = { ...production, resolve: async (host) => (lookups.push(host), resolve(host)) }
    expect(await checkWebhookUrl('https://public.example:22/', counting)).toEqual({ ok: false, status: 400, reason: `${PORT_RULE}; 22 is refused` })
    expect(await checkWebhookUrl('https://8.8.8.8:5432/', production)).toEqual({ ok: false, status: 400, reason: `${PORT_RULE}; 5432 is refused` })
    expect(await checkWebhookUrl('http://127.0.0.1:6379/', development)).toEqual({ ok: false, status: 400, reason: `${PORT_RULE}; 6379 is refused` })
    expect(await checkWebhookUrl('http://localhost:3306/', development)).toMatchObject({ ok: false, status: 400 })
    expect(lookups).toEqual([])
  })
})
