// The backing-service breaker's state machine, on a clock the test moves.
import { expect, test } from 'bun:test'
import { Breaker } from '../../shared/breaker'
import { isConnectionFailure } from '../../shared/db/deadline'

test('opens on a failure for the cool-down, says when to retry, and closes on a success', () => {
  let now = 1_000_000
  const breaker = new Breaker('test', 1500, () => now)
  expect(breaker.isOpen).toBe(false)
  breaker.failed()
  expect(breaker.isOpen).toBe(true)
  expect(breaker.retryAfter).toBe(2) // 1.5 s, in whole seconds
  now += 1499
  expect(breaker.isOpen).toBe(true)
  now += 1
  expect(breaker.isOpen).toBe(false) // half-open: the next statement probes
  breaker.failed()
  expect(breaker.isOpen).toBe(true)
  breaker.succeeded()
  expect(breaker.isOpen).toBe(false)
})

test('only connection-level failures count, not failing statements', () => {
  expect(isConnectionFailure(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }))).toBe(true)
  expect(isConnectionFailure(Object.assign(new Error('timeout'), { code: 'CONNECT_TIMEOUT' }))).toBe(true)
  expect(isConnectionFailure(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false)
  expect(isConnectionFailure(new Error('no code'))).toBe(false)
})
