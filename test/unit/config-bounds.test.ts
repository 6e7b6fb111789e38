// A setting with bounds is refused at start-up outside them, naming the variable and the bounds: a gateway that re-read
// its signing keys less often than every 30 s would verify tokens of a key it may not know yet (KEY_MATURE_SECONDS).
import { expect, test } from 'bun:test'

async function loadWith(env: Record<string, string>) {
  const proc = Bun.spawn(['bun', '-e', "await import('./shared/config')"], { env: { ...process.env, ...env }, stderr: 'pipe', stdout: 'ignore' })
  return { code: await proc.exited, stderr: await new Response(proc.stderr).text() }
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
