// A bad value is refused at start-up, naming the variable and the rule (a gateway that re-read its signing keys less often
// than every 30 s would verify tokens of a key it may not know yet); a renamed variable still works under its old name.
import { expect, test } from 'bun:test'

async function loadWith(env: Record<string, string>, script = "await import('./shared/config')") {
  const proc = Bun.spawn(['bun', '-e', script], { env: { ...process.env, ...env }, stderr: 'pipe', stdout: 'pipe' })
  const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()])
  return { code, stdout, stderr }
}

test('REALTIME_KEY_SET_REFRESH_MS: 1000 to 30 000 ms; beyond, the process refuses to start', async () => {
  for (const value of ['60000', '999']) {
    const { code, stderr } = await loadWith({ REALTIME_KEY_SET_REFRESH_MS: value })
    expect(code).not.toBe(0)
    expect(stderr).toContain(`REALTIME_KEY_SET_REFRESH_MS must be an integer from 1000 to 30000, got "${value}"`)
  }
  expect((await loadWith({ REALTIME_KEY_SET_REFRESH_MS: '30000' })).code).toBe(0)
})

test('ANALYTICS_REPLICA_MAX_LAG_MS: 0 to 300 000 ms; beyond, the process refuses to start', async () => {
  const { code, stderr } = await loadWith({ ANALYTICS_REPLICA_MAX_LAG_MS: '300001' })
  expect(code).not.toBe(0)
  expect(stderr).toContain('ANALYTICS_REPLICA_MAX_LAG_MS must be an integer from 0 to 300000, got "300001"')
  expect((await loadWith({ ANALYTICS_REPLICA_MAX_LAG_MS: '-1' })).code).not.toBe(0)
  for (const value of ['0', '300000']) expect((await loadWith({ ANALYTICS_REPLICA_MAX_LAG_MS: value })).code).toBe(0)
})

test('a variable set under its old name runs the process with its value and logs one warning at start naming the new name', async () => {
  const { code, stdout } = await loadWith({ REALTIME_CACHE_TTL_MS: '750', CACHE_TTL_MS: '' },
    "const { config } = await import('./shared/config'); await import('./shared/cache/invalidated-cache'); console.log('ttl', config.cache.ttlMs)")
  expect(code).toBe(0)
  const lines = stdout.trim().split('\n')
  const warnings = lines.filter((line) => line.startsWith('{')).map((line) => JSON.parse(line)).filter((entry) => entry.level === 'warn')
  expect(warnings.map((entry) => entry.msg)).toEqual([
    'REALTIME_CACHE_TTL_MS is renamed CACHE_TTL_MS: set CACHE_TTL_MS instead (REALTIME_CACHE_TTL_MS is read for one more release)',
  ])
  expect(lines).toContain('ttl 750')
})
