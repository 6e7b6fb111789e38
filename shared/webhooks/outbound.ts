// One outbound webhook request, made so a tenant's URL cannot reach what it must not: the host is resolved here, every
// address checked, and the connection made to the checked address itself (TLS verified against the name), so a DNS
// answer that changes between the check and the connect (rebinding) does not help. No redirect is followed, the
// whole exchange is bounded in time, and at most `maxResponseBytes` of the answer are read.
import { lookup } from 'node:dns/promises'
import http from 'node:http'
import https from 'node:https'
import { isIP } from 'node:net'
import { addressAllowed } from './url-policy'

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
  /** The HTTP status, or null when no answer came (refused address, DNS failure, timeout, connection error). */
  status: number | null
  durationMs: number
  /** The first bytes of the answer, as text. */
  excerpt: string
  /** Why there is no status, why a 3xx was not followed, or that the answer was cut short by the timeout. */
  error?: string
  /** The address connected to (or refused). */
  address?: string
}

class Refusal extends Error {}

const systemResolve = async (host: string) => (await lookup(host, { all: true, verbatim: true })).map((a) => a.address)

/** The addresses `host` names, every one checked; throws Refusal naming the first that is not allowed. */
async function checkedAddresses(host: string, request: OutboundRequest, signal: AbortSignal): Promise<string[]> {
  const literal = host.startsWith('[') ? host.slice(1, -1) : host
  const addresses = isIP(literal)
    ? [literal]
    : await Promise.race([
      (request.resolve ?? systemResolve)(literal).catch(() => {
        throw new Refusal(`${host} does not resolve`)
      }),
      new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(new Refusal('DNS lookup timed out')), { once: true })),
    ])
  if (addresses.length === 0) throw new Refusal(`${host} resolves to no address`)
  // The URL policy's classes, checked again here, at connect time. Which address was refused stays in the result's
  // `address` (for the platform's logs), not in the message a tenant may be shown.
  const refused = addresses.find((ip) => !addressAllowed(ip, request.allowPrivate))
  if (refused) {
    const why = isIP(literal) ? `${host} is not an allowed address` : `${host} does not resolve to allowed addresses only`
    throw Object.assign(new Refusal(why), { address: refused })
  }
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
    const [first] = await checkedAddresses(url.hostname, request, abort.signal)
    address = first
    const secure = url.protocol === 'https:'
    const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
    const answer = await new Promise<{ status: number; excerpt: string; location?: string; cut?: boolean }>((resolve, reject) => {
      // The timeout ends the exchange whatever the runtime's streams do: before the answer's head, as no answer; after
      // it, as an answer cut short (a receiver that sends its status and stalls has not been heard to the end).
      let head: { status: number; chunks: Buffer[]; location?: string } | undefined
      abort.signal.addEventListener('abort', () => head
        ? resolve({ status: head.status, excerpt: Buffer.concat(head.chunks).subarray(0, request.maxResponseBytes).toString('utf8'), location: head.location, cut: true })
        : reject(new Error('timeout')), { once: true })
      const outgoing = (secure ? https : http).request({
        host: address, port: url.port || (secure ? 443 : 80), path: `${url.pathname}${url.search}`, method: 'POST',
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
    const redirected = answer.status >= 300 && answer.status < 400
    const error = answer.cut
      ? `answer cut short: not complete within ${request.timeoutMs} ms`
      : redirected ? `redirect not followed${answer.location ? ` (Location: ${answer.location.slice(0, 512)})` : ''}` : undefined
    return { status: answer.status, durationMs: elapsed(), excerpt: answer.excerpt, address, ...(error ? { error } : {}) }
  } catch (error) {
    const message = abort.signal.aborted ? `no answer within ${request.timeoutMs} ms` : error instanceof Error ? error.message : String(error)
    return { status: null, durationMs: elapsed(), excerpt: '', error: message, address: (error as { address?: string }).address ?? address }
  } finally {
    clearTimeout(timer)
  }
}
