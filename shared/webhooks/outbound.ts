// One outbound webhook request, made so a tenant's URL cannot reach what it must not: the host is resolved here, every
// address checked, and the connection made to the checked address itself (TLS verified against the name), so a DNS
// answer that changes between the check and the connect (rebinding) does not help. No redirect is followed, the
// whole exchange is bounded in time, and at most `maxResponseBytes` of the answer are read. Why no answer came is told
// in fixed words (attempt-errors.ts), never in the runtime's message, which names the address and port it reached.
import { lookup } from 'node:dns/promises'
import http from 'node:http'
import https from 'node:https'
import { isIP } from 'node:net'
import { connectionFailure, rawCause } from './attempt-errors'
import { addressAllowed, portOf, webhookPortAllowed } from './url-policy'

export interface OutboundRequest {
  url: string
  headers: Record<string, string>
  body: string
  /** Connect, send and read the answer within this. */
  timeoutMs: number
  /** Read at most this much of the answer; the rest is not waited for. */
  maxResponseBytes: number
  /** Whether `http:` and loopback or private addresses are allowed (WEBHOOK_ALLOW_PRIVATE_URLS: development, tests). */
  allowPrivate: boolean
  /** Every address of a host name; the system resolver unless given (WEBHOOK_DNS_SERVERS: serversResolve). */
  resolve?: (host: string) => Promise<string[]>
  /** Certificate authorities trusted for `https:` instead of the runtime's (a private CA; the tests' self-signed one). */
  ca?: string
}

export interface OutboundResult {
  /** The HTTP status, or null when no answer came (refused address or port, DNS failure, timeout, connection error). */
  status: number | null
  durationMs: number
  /** The first bytes of the answer, as text. */
  excerpt: string
  /**
   * Why there is no status, why a 3xx was not followed, or that the answer was cut short by the timeout: shown to the
   * tenant, so in fixed words (CONNECTION_FAILURES for a failed connection), never an address it did not write.
   */
  error?: string
  /** The address connected to (or refused): for the platform's own use, never recorded nor shown to the tenant. */
  address?: string
  /**
   * Why a host name was refused, for the platform's logs only (`error` then says the same thing for every such case,
   * so that a tenant cannot tell a name that does not resolve from one that resolves to an internal address).
   */
  detail?: string
  /** The runtime's own error when the connection failed (code and message, addresses included): for the logs only. */
  cause?: string
}

class Refusal extends Error {
  constructor(message: string, readonly detail?: string, readonly address?: string) {
    super(message)
  }
}

const systemResolve = async (host: string) => (await lookup(host, { all: true, verbatim: true })).map((a) => a.address)

/**
 * The addresses `host` names, every one checked; throws a Refusal when any is not allowed. For a name, one message
 * whatever went wrong (no answer, no address, a refused one): telling them apart would let a tenant probe the
 * platform's internal DNS (a name of its own, CNAMEd to an internal name). The difference is in `detail`, for logs.
 */
async function checkedAddresses(host: string, request: OutboundRequest, signal: AbortSignal): Promise<string[]> {
  const literal = host.startsWith('[') ? host.slice(1, -1) : host
  if (isIP(literal)) {
    if (!addressAllowed(literal, request.allowPrivate)) throw new Refusal(`${host} is not an allowed address`, 'a refused address', literal)
    return [literal]
  }
  const refusal = (detail: string, address?: string) => new Refusal(`${host} does not resolve to allowed addresses only`, detail, address)
  const addresses = await Promise.race([
    (request.resolve ?? systemResolve)(literal).catch(() => {
      throw refusal('does not resolve')
    }),
    new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(refusal('DNS lookup timed out')), { once: true })),
  ])
  if (addresses.length === 0) throw refusal('resolves to no address')
  // The URL policy's classes, checked again here, at connect time.
  const refused = addresses.find((ip) => !addressAllowed(ip, request.allowPrivate))
  if (refused) throw refusal('resolves to a refused address', refused)
  return addresses
}

export async function sendOutbound(request: OutboundRequest): Promise<OutboundResult> {
  const started = performance.now()
  const elapsed = () => Math.round(performance.now() - started)
  const abort = new AbortController()
  const timer = setTimeout(() => abort.abort(), request.timeoutMs)
  let address: string | undefined
  try {
    const url = new URL(request.url)
    if (url.protocol !== 'https:' && !(request.allowPrivate && url.protocol === 'http:')) throw new Refusal(`${url.protocol} is not allowed`)
    // Checked at create and update too; an endpoint stored before the port rule is refused here, before any lookup.
    if (!webhookPortAllowed(portOf(url))) throw new Refusal(`port ${portOf(url)} is not allowed`)
    const addresses = await checkedAddresses(url.hostname, request, abort.signal)
    const secure = url.protocol === 'https:'
    const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
    const exchange = (to: string) => new Promise<{ status: number; excerpt: string; location?: string; cut?: boolean }>((resolve, reject) => {
      // The timeout ends the exchange whatever the runtime's streams do: before the answer's head, as no answer; after
      // it, as an answer cut short (its status stands; the attempt records that the rest never came).
      let head: { status: number; chunks: Buffer[]; location?: string } | undefined
      abort.signal.addEventListener('abort', () => head
        ? resolve({ status: head.status, excerpt: Buffer.concat(head.chunks).subarray(0, request.maxResponseBytes).toString('utf8'), location: head.location, cut: true })
        : reject(new Error('timeout')), { once: true })
      const outgoing = (secure ? https : http).request({
        host: to, port: url.port || (secure ? 443 : 80), path: `${url.pathname}${url.search}`, method: 'POST',
        // One connection per attempt (no agent, no keep-alive): a pooled socket would outlive the address check that
        // allowed it, and would be reused for whatever the name resolves to next.
        agent: false,
        headers: { ...request.headers, host: url.host, connection: 'close', 'content-length': String(Buffer.byteLength(request.body)) },
        ...(secure && !isIP(hostname) ? { servername: hostname } : {}),
        ...(secure && request.ca ? { ca: request.ca } : {}),
        signal: abort.signal,
      }, (response) => {
        const chunks: Buffer[] = []
        head = { status: response.statusCode ?? 0, chunks, location: typeof response.headers.location === 'string' ? response.headers.location : undefined }
        let size = 0
        const done = () => {
          response.destroy()
          resolve({
            status: response.statusCode ?? 0, excerpt: Buffer.concat(chunks).subarray(0, request.maxResponseBytes).toString('utf8'),
            location: typeof response.headers.location === 'string' ? response.headers.location : undefined,
          })
        }
        response.on('data', (chunk: Buffer) => {
          chunks.push(chunk)
          size += chunk.length
          if (size >= request.maxResponseBytes) done()
        })
        response.on('end', done)
        response.on('error', done)
      })
      outgoing.on('error', reject)
      outgoing.end(request.body)
    })
    // Each checked address in turn, within the one timeout: a host with one dead address still answers on another.
    let answer: Awaited<ReturnType<typeof exchange>> | undefined
    for (const [i, to] of addresses.entries()) {
      address = to
      try {
        answer = await exchange(to)
        break
      } catch (error) {
        if (abort.signal.aborted || i === addresses.length - 1) throw error
      }
    }
    if (!answer) throw new Error('no address')
    const redirected = answer.status >= 300 && answer.status < 400
    const error = answer.cut
      ? `answer cut short: not complete within ${request.timeoutMs} ms`
      : redirected ? `redirect not followed${answer.location ? ` (Location: ${answer.location.slice(0, 512)})` : ''}` : undefined
    return { status: answer.status, durationMs: elapsed(), excerpt: answer.excerpt, address, ...(error ? { error } : {}) }
  } catch (error) {
    const refusal = error instanceof Refusal ? error : undefined
    const failed = !abort.signal.aborted && !refusal
    const message = abort.signal.aborted ? `no answer within ${request.timeoutMs} ms` : refusal ? refusal.message : connectionFailure(error)
    return {
      status: null, durationMs: elapsed(), excerpt: '', error: message, address: refusal?.address ?? address,
      ...(refusal?.detail ? { detail: refusal.detail } : {}),
      ...(failed ? { cause: rawCause(error) } : {}),
    }
  } finally {
    clearTimeout(timer)
  }
}
