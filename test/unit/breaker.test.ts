// The backing-service breaker's state machine, on a clock the test moves.
import { expect, test } from 'bun:test'
import { Breaker, breakerCounts } from '../../shared/breaker'
import { isConnectionFailure } from '../../shared/errors'

test('closed lets everything through; a failure opens it for the cool-down, then one probe at a time passes', () => {
  let now = 1_000_000
  const breaker = new Breaker('test', 1500, () => now)
  expect([breaker.tryPass(), breaker.tryPass()]).toEqual([true, true])
  breaker.failed()
  expect(breaker.tryPass()).toBe(false)
  expect(breaker.retryAfter).toBe(2) // 1.5 s, in whole seconds
  now += 1499
  expect(breaker.tryPass()).toBe(false)
  now += 1
  expect(breaker.tryPass()).toBe(true) // the probe
  expect(breaker.tryPass()).toBe(false) // everyone else still fails fast while it is out
  now += 1500
  expect(breaker.tryPass()).toBe(true) // a probe that never reported does not block forever
  breaker.failed()
  expect(breaker.tryPass()).toBe(false)
  breaker.succeeded()
  expect([breaker.tryPass(), breaker.tryPass()]).toEqual([true, true])
  expect(breaker.isOpen).toBe(false)
})

test('only connection-level failures count, not failing statements', () => {
  expect(isConnectionFailure(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }))).toBe(true)
  expect(isConnectionFailure(Object.assign(new Error('timeout'), { code: 'CONNECT_TIMEOUT' }))).toBe(true)
  expect(isConnectionFailure(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false)
  expect(isConnectionFailure(new Error('no code'))).toBe(false)
})

test('a breaker dropped while open (a cluster node gone) takes back its open count, and counts nothing after', () => {
  const open = () => breakerCounts.open.get('disposal') ?? 0
  const kept = new Breaker('disposal kept', 1000)
  const gone = new Breaker('disposal gone', 1000)
  kept.failed()
  gone.failed()
  expect(open()).toBe(2)
  expect(breakerCounts.opened.get('disposal')).toBe(2)
  gone.dispose()
  expect(open()).toBe(1)
  gone.succeeded() // a command still in flight reporting to it
  gone.failed()
  gone.dispose()
  expect(open()).toBe(1)
  kept.succeeded()
  expect(open()).toBe(0)
  expect(breakerCounts.opened.get('disposal')).toBe(2)
})
