// Real worker processes: several on one port, readiness, request logs, clean shutdown; migrations run concurrently.
import { describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import { config } from '../../shared/config'
import { migrate } from '../../shared/db/migrate'
import { get } from 'node:http'
import { freePort, startWorker } from '../helpers'

/** GET /healthz on a connection of its own (fetch pools connections), so the kernel picks a worker each time. */
function healthOnNewConnection(port: number): Promise<{ pid: number }> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path: '/healthz', agent: false }, (res) => {
      let text = ''
      res.on('data', (chunk) => (text += chunk))
      res.on('end', () => resolve(JSON.parse(text)))
    }).on('error', reject)
  })
}

describe('api workers', () => {
  test('two workers share one port (reusePort) and both serve', async () => {
    const port = await freePort()
    const env = { API_PORT: String(port) }
    const a = await startWorker('services/api/main.ts', env, port)
    const b = await startWorker('services/api/main.ts', env, port)
    try {
      const pids = new Set<number>()
      // b's health check may have been answered by a, so b can still be starting: poll for up to 10 s.
      for (const deadline = Date.now() + 10_000; pids.size < 2 && Date.now() < deadline; ) {
        pids.add((await healthOnNewConnection(port)).pid)
      }
      expect(pids).toEqual(new Set([a.proc.pid, b.proc.pid]))
    } finally {
      await a.stop()
      await b.stop()
    }
  })

  test('/readyz is 503 while Redis does not answer, /healthz stays 200', async () => {
    const port = await freePort()
    const deadRedis = await freePort()
    const w = await startWorker('services/api/main.ts', { API_PORT: String(port), REDIS_URL: `redis://127.0.0.1:${deadRedis}` }, port, '/healthz')
    try {
      expect((await fetch(`${w.url}/healthz`)).status).toBe(200)
      const ready = await fetch(`${w.url}/readyz`)
      expect(ready.status).toBe(503)
      expect(await ready.json()).toEqual({ status: 'not_ready', postgres: 'ok', redis: 'down' })
    } finally {
      await w.stop()
    }
  })

  test('while PostgreSQL is unreachable, operations answer 503 unavailable with Retry-After, not 500', async () => {
    const port = await freePort()
    const deadDb = await freePort()
    const w = await startWorker('services/api/main.ts', { API_PORT: String(port), DATABASE_URL: `postgres://postgres@127.0.0.1:${deadDb}/none` }, port, '/healthz')
    try {
      const response = await fetch(`${w.url}/products`, { headers: { authorization: `Bearer pls_${'A'.repeat(43)}` } })
      expect(response.status).toBe(503)
      expect(response.headers.get('retry-after')).toBe('1')
      expect(((await response.json()) as any).error).toBe('unavailable')
      expect((await fetch(`${w.url}/readyz`)).status).toBe(503)
    } finally {
      await w.stop()
    }
  })

  test('sign-ups and logins are limited per client IP (429 with Retry-After); other addresses are not affected', async () => {
    const port = await freePort()
    const w = await startWorker('services/api/main.ts', { API_PORT: String(port), AUTH_RATE_LIMIT: '3', TRUST_PROXY: '1' }, port)
    const ip = `10.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`
    const attempt = (from: string, path = '/auth/login') => fetch(`${w.url}${path}`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': from },
      body: JSON.stringify({ email: `${crypto.randomUUID()}@example.test`, password: 'wrong password' }),
    })
    try {
      // All attempts must land in one fixed minute window: start clear of its end.
      const left = 60_000 - (Date.now() % 60_000)
      if (left < 5000) await Bun.sleep(left + 50)
      const statuses = []
      for (let i = 0; i < 3; i++) statuses.push((await attempt(ip, i === 0 ? '/auth/signup' : '/auth/login')).status)
      expect(statuses).toEqual([200, 401, 401])
      const limited = await attempt(ip)
      expect(limited.status).toBe(429)
      expect(((await limited.json()) as any).error).toBe('rate_limited')
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
      expect((await attempt(`${ip}9`)).status).toBe(401) // another address: counted on its own
    } finally {
      await w.stop()
    }
  })

  test('logs one JSON line per request and exits 0 on SIGTERM', async () => {
    const port = await freePort()
    const proc = Bun.spawn(['bun', 'run', 'services/api/main.ts'], {
      env: { ...process.env, API_PORT: String(port), LOG_REQUESTS: '1' }, stdout: 'pipe', stderr: 'inherit',
    })
    for (let i = 0; i < 200; i++) {
      if (await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false)) break
      await Bun.sleep(50)
    }
    await fetch(`http://127.0.0.1:${port}/products`)
    proc.kill('SIGTERM')
    expect(await proc.exited).toBe(0)
    const lines = (await new Response(proc.stdout).text()).trim().split('\n').map((l) => JSON.parse(l))
    const requests = lines.filter((l) => l.msg === 'request')
    expect(requests.at(-1)).toMatchObject({ level: 'info', proc: 'api', method: 'GET', path: '/products', status: 401 })
    expect(typeof requests.at(-1).ms).toBe('number')
    expect(lines.at(-1).msg).toBe('shutting down')
  })
})

test('migrations are recorded, and safe to run twice and from two connections at once', async () => {
  const a = postgres(config.databaseUrl, { max: 1, onnotice: () => {} })
  const b = postgres(config.databaseUrl, { max: 1, onnotice: () => {} })
  try {
    const results = await Promise.all([migrate(a), migrate(b), migrate(a)])
    expect(results.flat()).toEqual([]) // the preload already applied everything
    const recorded = await a`select name from schema_migrations order by name`
    expect(recorded.map((r) => r.name)).toContain('0001_accounts.sql')
    expect(new Set(recorded.map((r) => r.name)).size).toBe(recorded.length)
  } finally {
    await a.end()
    await b.end()
  }
})
