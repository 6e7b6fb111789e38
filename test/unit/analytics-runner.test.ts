// The console's insight runner (services/api/console/app/views/analytics/runner.ts) with a fake call and a fake pause:
// at most two runs at once, a 429 retried after the pause its body names, queued runs dropped by clear() and stop().
import { expect, test } from 'bun:test'
import { ConsoleApiError } from '../../services/api/console/app/api'
import { createRunner, retryPause, RunCancelled } from '../../services/api/console/app/views/analytics/runner'

/** A call whose answers the test gives by hand, recording what was called in which order. */
function fakeCall() {
  const calls: string[] = []
  const pending = new Map<string, { resolve: (value: any) => void; reject: (error: unknown) => void }[]>()
  const call = (id: string) => new Promise<any>((resolve, reject) => {
    calls.push(id)
    pending.set(id, [...(pending.get(id) ?? []), { resolve, reject }])
  })
  const answer = (id: string) => pending.get(id)!.shift()!.resolve({ insight_id: id, kind: 'metric', result: {} })
  const refuse = (id: string, error: unknown) => pending.get(id)!.shift()!.reject(error)
  return { calls, call, answer, refuse }
}
const settle = () => new Promise((resolve) => setTimeout(resolve, 0))
const tooMany = (body: Record<string, unknown>) => new ConsoleApiError(429, { error: 'too_many_queries', message: 'busy', ...body } as any)

test('two runs at once; the rest queue in order', async () => {
  const fake = fakeCall()
  const runner = createRunner(fake.call)
  const runs = ['a', 'b', 'c'].map((id) => runner.run(id))
  await settle()
  expect(fake.calls).toEqual(['a', 'b'])
  fake.answer('b')
  await settle()
  expect(fake.calls).toEqual(['a', 'b', 'c'])
  fake.answer('a')
  fake.answer('c')
  expect((await Promise.all(runs)).map((run) => run.insight_id)).toEqual(['a', 'b', 'c'])
})

test('a 429 is retried after the pause its body names, else after a growing default', async () => {
  expect(retryPause(tooMany({ retryAfter: 3 }), 1)).toBe(3000)
  expect(retryPause(tooMany({ retryAfter: 10_000 }), 1)).toBe(60_000)
  expect(retryPause(tooMany({}), 2)).toBe(2000)
  expect(retryPause(tooMany({ retryAfter: 'soon' }), 1)).toBe(1000)
  const fake = fakeCall()
  const pauses: number[] = []
  const runner = createRunner(fake.call, async (ms) => { pauses.push(ms) })
  const run = runner.run('a')
  await settle()
  fake.refuse('a', tooMany({ retryAfter: 2 }))
  await settle()
  expect(pauses).toEqual([2000])
  expect(fake.calls).toEqual(['a', 'a'])
  fake.answer('a')
  expect((await run).insight_id).toBe('a')
  // Any other error is not retried.
  const failing = runner.run('b')
  await settle()
  fake.refuse('b', new ConsoleApiError(404, { error: 'not_found', message: 'gone' }))
  await expect(failing).rejects.toBeInstanceOf(ConsoleApiError)
  expect(fake.calls).toEqual(['a', 'a', 'b'])
})

test('clear() drops the queued runs, so a redraw\'s runs go next; stop() drops everything after', async () => {
  const fake = fakeCall()
  const runner = createRunner(fake.call)
  const old = ['a', 'b', 'c', 'd'].map((id) => runner.run(id))
  for (const run of old) run.catch(() => {}) // rejected at clear(), looked at below
  await settle()
  runner.clear() // a restore redraws the dashboard
  const fresh = runner.run('e')
  fake.answer('a')
  await settle()
  expect(fake.calls).toEqual(['a', 'b', 'e']) // c and d never ran
  await expect(old[2]!).rejects.toBeInstanceOf(RunCancelled)
  await expect(old[3]!).rejects.toBeInstanceOf(RunCancelled)
  fake.answer('e')
  expect((await fresh).insight_id).toBe('e')
  // A retry waiting out its pause is dropped too.
  let resume = () => {}
  const retrying = createRunner(fake.call, () => new Promise<void>((resolve) => { resume = resolve }))
  const run = retrying.run('f')
  run.catch(() => {})
  await settle()
  fake.refuse('f', tooMany({ retryAfter: 1 }))
  await settle()
  retrying.stop()
  resume()
  await expect(run).rejects.toBeInstanceOf(RunCancelled)
  expect(fake.calls.filter((id) => id === 'f')).toEqual(['f'])
  await expect(retrying.run('g')).rejects.toBeInstanceOf(RunCancelled)
})
