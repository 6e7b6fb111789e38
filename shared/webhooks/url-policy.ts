// Which URLs a webhook endpoint may name: https only, no userinfo or fragment, at most 2048 bytes, a port a receiver
// listens on, and a host that is public (an IP literal outside every special-purpose range, or a name whose every
// address is). Checked at create and update; the delivery slice must check the address (and the port) again when it
// connects, or DNS rebinding (or an endpoint stored before a rule) gets past this check.
import { lookup, Resolver } from 'node:dns/promises'
import { isIP } from 'node:net'

/** Most bytes of a webhook URL, as given and as stored (normalized by the WHATWG parser). */
export const URL_MAX_BYTES = 2048

/** What an address is, by the IANA special-purpose registries; only `public` may be called in production. */
export type AddressClass =
  | 'public' | 'loopback' | 'private' | 'unique-local' | 'link-local' | 'cgnat' | 'unspecified' | 'multicast'
  | 'reserved' | 'documentation' | 'benchmark'

/** The classes a deployment that allows private URLs (development, the tests) may also call. */
const PRIVATE_ALLOWED: ReadonlySet<AddressClass> = new Set(['loopback', 'private', 'unique-local'])

export interface UrlPolicy {
  /** Allow `http:` and loopback or private addresses (WEBHOOK_ALLOW_PRIVATE_URLS): development and tests only. */
  allowPrivate: boolean
  /** Longest a host name's resolution may take; past it the URL is refused. */
  dnsTimeoutMs: number
  /** Every address of a host name; node:dns `lookup` (the system resolver, as a connect would use) unless given. */
  resolve?: (host: string) => Promise<string[]>
}

/** Why a URL is refused: 400 for its shape, 422 for where it points. `reason` goes in the field error. */
export type UrlVerdict = { ok: true; url: string } | { ok: false; status: 400 | 422; reason: string }

// IPv4 ranges that are not public, most specific first where they nest (0.0.0.0 is unspecified within 0/8).
const V4_RANGES: [string, number, AddressClass][] = [
  ['0.0.0.0', 32, 'unspecified'], ['0.0.0.0', 8, 'reserved'], ['10.0.0.0', 8, 'private'], ['100.64.0.0', 10, 'cgnat'],
  ['127.0.0.0', 8, 'loopback'], ['169.254.0.0', 16, 'link-local'], ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'reserved'], ['192.0.2.0', 24, 'documentation'], ['192.88.99.0', 24, 'reserved'],
  ['192.168.0.0', 16, 'private'], ['198.18.0.0', 15, 'benchmark'], ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'], ['224.0.0.0', 4, 'multicast'], ['240.0.0.0', 4, 'reserved'],
]

const v4Number = (ip: string) => ip.split('.').reduce((n, part) => n * 256 + Number(part), 0)

function classifyV4(value: number): AddressClass {
  for (const [base, bits, kind] of V4_RANGES) {
    const size = 2 ** (32 - bits)
    if (Math.floor(value / size) === Math.floor(v4Number(base) / size)) return kind
  }
  return 'public'
}

/** The eight 16-bit groups of an IPv6 address (zone id dropped, embedded dotted IPv4 read), or null. */
function v6Groups(text: string): number[] | null {
  let ip = text.replace(/^\[|\]$/g, '').replace(/%.*$/, '')
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(ip)
  if (dotted) {
    const v4 = v4Number(dotted[1]!)
    ip = ip.slice(0, -dotted[1]!.length) + `${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`
  }
  const halves = ip.split('::')
  if (halves.length > 2) return null
  const part = (s: string | undefined) => (s ? s.split(':').map((g) => parseInt(g, 16)) : [])
  const head = part(halves[0])
  const tail = part(halves[1])
  const fill = 8 - head.length - tail.length
  if (halves.length === 1 ? fill !== 0 : fill < 1) return null
  const groups = [...head, ...Array(halves.length === 2 ? fill : 0).fill(0), ...tail]
  return groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null
}

function classifyV6(g: number[]): AddressClass {
  const zeroTo = (n: number) => g.slice(0, n).every((x) => x === 0)
  const v4At = (i: number) => g[i]! * 65536 + g[i + 1]!
  if (zeroTo(8)) return 'unspecified'
  if (zeroTo(7) && g[7] === 1) return 'loopback'
  if (zeroTo(5) && g[5] === 0xffff) return classifyV4(v4At(6)) // IPv4-mapped ::ffff:a.b.c.d
  if (zeroTo(6)) return classifyV4(v4At(6)) // IPv4-compatible ::a.b.c.d (deprecated, still routed by some stacks)
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return classifyV4(v4At(6)) // NAT64
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'private' // local-use NAT64, 64:ff9b:1::/48
  if (g[0] === 0x2002) return classifyV4(v4At(1)) // 6to4 carries its IPv4 address
  if (g[0] === 0x100 && g.slice(1, 4).every((x) => x === 0)) return 'reserved' // discard-only 100::/64
  if (g[0] === 0x2001 && g[1] === 0xdb8) return 'documentation'
  if ((g[0]! & 0xfff0) === 0x3ff0) return 'documentation' // 3fff::/20
  if (g[0] === 0x2001 && g[1] === 2 && g[2] === 0) return 'benchmark' // 2001:2::/48
  if (g[0] === 0x2001 && g[1]! < 0x200) return 'reserved' // 2001::/23: IETF assignments, Teredo
  if ((g[0]! & 0xfe00) === 0xfc00) return 'unique-local'
  if ((g[0]! & 0xffc0) === 0xfe80) return 'link-local'
  if ((g[0]! & 0xffc0) === 0xfec0) return 'reserved' // site-local, deprecated
  if ((g[0]! & 0xff00) === 0xff00) return 'multicast'
  if ((g[0]! & 0xe000) !== 0x2000) return 'reserved' // only 2000::/3 is allocated for global unicast
  return 'public'
}

/**
 * The class of an IP address (IPv4 dotted, IPv6 with or without brackets), or null when `ip` is not an address.
 * @example classifyAddress('169.254.169.254') // 'link-local' (the cloud metadata address)
 */
export function classifyAddress(ip: string): AddressClass | null {
  const bare = ip.replace(/^\[|\]$/g, '')
  const family = isIP(bare.replace(/%.*$/, ''))
  if (family === 4) return classifyV4(v4Number(bare))
  if (family === 6) {
    const groups = v6Groups(bare)
    return groups ? classifyV6(groups) : null
  }
  return null
}

/** `localhost` and its subdomains (RFC 6761: always loopback, whatever DNS says), with or without the final dot. */
export const isLocalhostName = (host: string) => /(^|\.)localhost$/i.test(host.replace(/\.$/, ''))

/**
 * Ports above 1023 that known services listen on (data stores, queues, cluster control planes, remote desktops,
 * proxies): a webhook may not name them, so that the platform's egress addresses cannot be used to find them open.
 */
export const SERVICE_PORTS: ReadonlyMap<number, string> = new Map([
  [1080, 'SOCKS proxy'], [1433, 'SQL Server'], [1521, 'Oracle'], [2049, 'NFS'], [2181, 'ZooKeeper'], [2375, 'Docker'],
  [2376, 'Docker (TLS)'], [2379, 'etcd'], [2380, 'etcd peers'], [3128, 'HTTP proxy'], [3306, 'MySQL'], [3389, 'RDP'],
  [4369, 'Erlang port mapper'], [5432, 'PostgreSQL'], [5672, 'AMQP'], [5900, 'VNC'], [5984, 'CouchDB'], [5985, 'WinRM'],
  [5986, 'WinRM (TLS)'], [6379, 'Redis'], [6443, 'Kubernetes API'], [7000, 'Cassandra'], [7001, 'Cassandra (TLS)'],
  [8200, 'Vault'], [8500, 'Consul'], [9000, 'ClickHouse, php-fpm, MinIO'], [9042, 'Cassandra CQL'], [9092, 'Kafka'],
  [9200, 'Elasticsearch'], [9300, 'Elasticsearch nodes'], [10250, 'kubelet'], [11211, 'memcached'],
  [15672, 'RabbitMQ management'], [27017, 'MongoDB'],
])

/** The port a URL connects to: the one it names, or its scheme's (443, 80). */
export const portOf = (url: URL) => (url.port ? Number(url.port) : url.protocol === 'http:' ? 80 : 443)

/**
 * Whether a webhook receiver may listen on `port`: 443 and 80, or any port from 1024 up that is not a known service's
 * (SERVICE_PORTS). Below 1024 are the system's services (SSH, SMTP, DNS...), where no receiver listens.
 * @example webhookPortAllowed(8443) // true; webhookPortAllowed(22) and webhookPortAllowed(6379) are false
 */
export const webhookPortAllowed = (port: number) => port === 443 || port === 80 || (port >= 1024 && !SERVICE_PORTS.has(port))

/** The field error for a refused port (the same words in every deployment: private URLs allowed or not). */
export const PORT_RULE = 'must use port 443, 80, or one from 1024 up that no known service uses (docs/webhooks.md, URL rules)'

const refused = (status: 400 | 422, reason: string): UrlVerdict => ({ ok: false, status, reason })

const systemResolve = async (host: string) => (await lookup(host, { all: true, verbatim: true })).map((a) => a.address)

/**
 * A resolver asking `servers` (`ip` or `ip:port`) for a host's A and AAAA records, or undefined for none given (the
 * system resolver then). Rejects when neither family answers, as a failed lookup does.
 */
export function serversResolve(servers: readonly string[], timeoutMs: number): ((host: string) => Promise<string[]>) | undefined {
  if (servers.length === 0) return undefined
  return async (host) => {
    const resolver = new Resolver({ timeout: timeoutMs, tries: 1 })
    resolver.setServers([...servers])
    try {
      const answers = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)])
      const found = answers.flatMap((answer) => (answer.status === 'fulfilled' ? answer.value : []))
      if (found.length === 0) throw new Error(`${host} does not resolve`)
      return found
    } finally {
      resolver.cancel()
    }
  }
}

/** Every address of `host`, or none when it does not resolve within the timeout. */
async function resolveWithin(host: string, policy: UrlPolicy): Promise<string[]> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const timeout = new Promise<string[]>((done) => {
    timer = setTimeout(() => done([]), policy.dnsTimeoutMs)
  })
  try {
    return await Promise.race([(policy.resolve ?? systemResolve)(host).catch(() => [] as string[]), timeout])
  } finally {
    clearTimeout(timer)
  }
}

/** Whether a delivery may connect to `ip`: a public address, or (allowPrivate) a loopback or private one. */
export const addressAllowed = (ip: string, allowPrivate: boolean) =>
  !addressRefusal(classifyAddress(ip) ?? 'reserved', ip, allowPrivate)

/** Why a host name is refused, whatever the cause. */
export const nameRefusal = (host: string, policy: UrlPolicy) =>
  `its host ${host} must resolve, within ${policy.dnsTimeoutMs} ms, to ${policy.allowPrivate ? 'public or private' : 'public'} addresses only`

/** Whether an address of this class may be called (`allowPrivate`: the policy's flag); the reason when it may not. */
function addressRefusal(kind: AddressClass, address: string, allowPrivate: boolean): string | null {
  if (kind === 'public' || (allowPrivate && PRIVATE_ALLOWED.has(kind))) return null
  return `its host ${address} is a ${kind} address, not a public one`
}

/**
 * Checks a webhook URL under `policy`; on success answers it normalized (WHATWG: `http://2130706433/` becomes
 * `http://127.0.0.1/`), which is what must be stored, since it is what was checked.
 */
export async function checkWebhookUrl(text: string, policy: UrlPolicy): Promise<UrlVerdict> {
  if (Buffer.byteLength(text) > URL_MAX_BYTES) return refused(400, `must be at most ${URL_MAX_BYTES} bytes`)
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return refused(400, 'is not an absolute URL')
  }
  const schemes = policy.allowPrivate ? ['https:', 'http:'] : ['https:']
  if (!schemes.includes(url.protocol)) return refused(400, policy.allowPrivate ? 'must be https or http' : 'must be https')
  if (url.username || url.password) return refused(400, 'must not carry a user name or password')
  if (text.includes('#')) return refused(400, 'must not carry a fragment')
  if (!webhookPortAllowed(portOf(url))) return refused(400, `${PORT_RULE}; ${portOf(url)} is refused`)
  if (Buffer.byteLength(url.href) > URL_MAX_BYTES) return refused(400, `must be at most ${URL_MAX_BYTES} bytes once normalized`)
  const host = url.hostname
  const literal = classifyAddress(host)
  if (literal) {
    const refusal = addressRefusal(literal, host, policy.allowPrivate)
    return refusal ? refused(422, refusal) : { ok: true, url: url.href }
  }
  if (isLocalhostName(host)) {
    return policy.allowPrivate ? { ok: true, url: url.href } : refused(422, `its host ${host} is a loopback name`)
  }
  // One answer for every way a name fails: saying which (no answer, or the private address it names) would let any
  // tenant map the platform's own network through its resolver, search domains and hosts file.
  const addresses = await resolveWithin(host, policy)
  const fit = addresses.length > 0 && addresses.every((address) => addressAllowed(address, policy.allowPrivate))
  return fit ? { ok: true, url: url.href } : refused(422, nameRefusal(host, policy))
}
