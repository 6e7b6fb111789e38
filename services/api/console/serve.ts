// The web console (docs/console.md): a single-page app the api process serves at /console. Its script is bundled
// from ./app by Bun.build on first request and kept in memory: no build step, nothing generated in git. The page only
// ever calls the platform's own REST operations, with a bearer token it keeps in memory; the cookie that carries it
// across a reload is read by ./session.ts alone, never by an API route, so CSRF has nothing to ride on.
import { Elysia } from 'elysia'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { config } from '../../../shared/config'
import { internalError, notFound, toErrorResponse } from '../../../shared/errors'
import { describeError, log } from '../../../shared/log'
import { consoleSessionRoutes } from './session'

interface Asset { body: string | Blob; type: string; etag: string }

const here = import.meta.dir
const etagOf = (text: string) => `"${createHash('sha256').update(text).digest('base64url').slice(0, 16)}"`

async function bundle(): Promise<string> {
  const built = await Bun.build({ entrypoints: [join(here, 'app/main.ts')], target: 'browser', minify: true })
  if (!built.success || !built.outputs[0]) throw new Error(`console bundle failed: ${built.logs.map(String).join('; ')}`)
  return await built.outputs[0].text()
}

async function text(path: string, type: string): Promise<Asset> {
  const body = await Bun.file(path).text()
  return { body, type, etag: etagOf(body) }
}

// One stylesheet: the frame's, then each area's own (app/views/<area>/area.css), so areas never edit one shared file.
async function styles(): Promise<Asset> {
  const areas: string[] = []
  for await (const file of new Bun.Glob('app/views/*/area.css').scan({ cwd: here, absolute: true })) areas.push(file)
  const files = [join(here, 'console.css'), ...areas.sort()]
  const body = (await Promise.all(files.map((file) => Bun.file(file).text()))).join('\n')
  return { body, type: 'text/css; charset=utf-8', etag: etagOf(body) }
}

// Built once per process, on first use: tests that never open the console never pay for the bundle.
let assets: Promise<Map<string, Asset>> | undefined
function loadAssets(): Promise<Map<string, Asset>> {
  assets ??= (async () => {
    const script = await bundle()
    return new Map<string, Asset>([
      ['index.html', await text(join(here, 'index.html'), 'text/html; charset=utf-8')],
      ['app.js', { body: script, type: 'text/javascript; charset=utf-8', etag: etagOf(script) }],
      ['console.css', await styles()],
      ['uplot.css', await text(require.resolve('uplot/dist/uPlot.min.css'), 'text/css; charset=utf-8')],
    ])
  })().catch((error) => {
    assets = undefined // a failed build is retried by the next request, not cached
    throw error
  })
  return assets
}

/** The policy every console response carries: scripts and styles from this origin only, no inline code at all. */
export function contentSecurityPolicy(): string {
  // The live channel inspector opens a WebSocket to the gateway, the only other origin the page may reach.
  const gateway = new URL(config.gatewayUrl).origin.replace(/^http/, 'ws')
  return [
    "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "font-src 'self'",
    `connect-src 'self' ${gateway}`, "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
    // No code of the console writes HTML: with Trusted Types and no policy, any HTML sink a mistake adds throws.
    "require-trusted-types-for 'script'", "trusted-types 'none'",
  ].join('; ')
}

/** The headers every console response carries, errors and 304s included. */
function securityHeaders(): Record<string, string> {
  return {
    'content-security-policy': contentSecurityPolicy(),
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
  }
}

/** Whether an If-None-Match header (a list, weak tags allowed: RFC 9110 weak comparison) names `etag`. */
function matches(ifNoneMatch: string | null, etag: string): boolean {
  if (!ifNoneMatch) return false
  return ifNoneMatch.split(',').some((tag) => tag.trim() === '*' || tag.trim().replace(/^W\//, '') === etag)
}

function serve(asset: Asset, request: Request): Response {
  const headers = { 'content-type': asset.type, 'cache-control': 'no-cache', etag: asset.etag, ...securityHeaders() }
  if (matches(request.headers.get('if-none-match'), asset.etag)) return new Response(null, { status: 304, headers })
  return new Response(asset.body, { headers })
}

async function find(name: string): Promise<Asset> {
  let found: Asset | undefined
  try {
    found = (await loadAssets()).get(name)
  } catch (error) {
    log('error', 'console build failed', describeError(error))
    throw internalError()
  }
  if (!found) throw notFound('Console asset')
  return found
}

async function asset(name: string, request: Request): Promise<Response> {
  try {
    return serve(await find(name), request)
  } catch (error) {
    const response = toErrorResponse(error)
    for (const [header, value] of Object.entries(securityHeaders())) response.headers.set(header, value)
    return response
  }
}

/** GET /console (the page; every view is a #fragment of it), /console/assets/{name} and the session's /console/session. */
export function consoleRoutes() {
  return new Elysia()
    .use(consoleSessionRoutes())
    .get('/console', ({ request }) => asset('index.html', request))
    .get('/console/', ({ request }) => asset('index.html', request))
    .get('/console/assets/:name', ({ params, request }) => asset(params.name, request))
}
