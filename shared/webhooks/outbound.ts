// One outbound webhook request, made so a tenant's URL cannot reach what it must not: the host is resolved here, every
// address checked, and the connection made to the checked address itself (TLS verified against the name), so a DNS
// answer that changes between the check and the connect (rebinding) does not help. No redirect is followed, the
// whole exchange is bounded in time, and at most `maxResponseBytes` of the answer are read.
import { lookup } from 'node:dns/promises'
import http from 'node:http'
import https from 'node:https'
import { isIP } from 'node:net'

export interface OutboundRequest {
  url: string
  headers: Record<string, string>
  body: string
  /** Connect, send and read the answer within this. */
  timeoutMs: number
  /** Read at most this much of the answer; the rest is not waited for. */
  maxResponseBytes: number
  /** Whether an address may be loopback or private (development and tests only). */
  allowPrivate: boolean
  /** Whether `ip` is a public address (the URL policy's classification). */
  isPublic: (ip: string) => boolean
}

export interface OutboundResult {
  /** The HTTP status, or null when no answer came (refused address, DNS failure, timeout, connection error). */
  status: number | null
  durationMs: number
  /** The first bytes of the answer, as text. */
  excerpt: string
  /** Why there is no status, or why a 3xx was not followed. */
  error?: string
  /** The address connected to (or refused). */
  address?: string
}

class Refusal extends Error {}

/** The addresses `host` names, every one checked; throws Refusal naming the first that is not allowed. */
async function checkedAddresses(host: string, request: OutboundRequest, signal: AbortSignal): Promise<string[]> {
  const literal = host.startsWith('[') ? host.slice(1, -1) : host
  const addresses = isIP(literal)
    ? [literal]
    : await Promise.race([
      lookup(literal, { all: true, verbatim: true }).then((found) => found.map((a) => a.address), () => {
        throw new Refusal(`${host} does not resolve`)
      }),
      new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(new Refusal('DNS lookup timed out')), { once: true })),
    ])
  if (addresses.length === 0) throw new Refusal(`${host} resolves to no address`)
  const refused = request.allowPrivate ? undefined : addresses.find((ip) => !request.isPublic(ip))
  if (refused) throw Object.assign(new Refusal(`${host} resolves to ${refused}, which is not a public address`), { address: refused })
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
    const [first] = await checkedAddresses(url.hostname, request, abort.signal)
    address = first
    const secure = url.protocol === 'https:'
    const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
    const answer = await new Promise<{ status: number; excerpt: string; location?: string }>((resolve, reject) => {
      const outgoing = (secure ? https : http).request({
        host: address, port: url.port || (secure ? 443 : 80), path: `${url.pathname}${url.search}`, method: 'POST',
        headers: { ...request.headers, host: url.host, 'content-length': String(Buffer.byteLength(request.body)) },
        ...(secure && !isIP(hostname) ? { servername: hostname } : {}),
        signal: abort.signal,
      }, (response) => {
        const chunks: Buffer[] = []
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
    return {
      status: answer.status, durationMs: elapsed(), excerpt: answer.excerpt, address,
      ...(redirected ? { error: `redirect not followed${answer.location ? ` (Location: ${answer.location.slice(0, 512)})` : ''}` } : {}),
    }
  } catch (error) {
    const message = abort.signal.aborted ? `no answer within ${request.timeoutMs} ms` : error instanceof Error ? error.message : String(error)
    return { status: null, durationMs: elapsed(), excerpt: '', error: message, address: (error as { address?: string }).address ?? address }
  } finally {
    clearTimeout(timer)
  }
}
