// The webhook retry schedule: Svix's and Resend's by default, shortened by configuration, read strictly.
import { expect, test } from 'bun:test'
import { DEFAULT_RETRY_DELAYS_MS, MAX_RETRIES, nextRetryDelay, parseRetryDelays } from '../../shared/webhooks/schedule'

test('by default: at once, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h; no ninth attempt', () => {
  const delays = Array.from({ length: 8 }, (_, i) => nextRetryDelay(i + 1))
  expect(delays).toEqual([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000, null])
  expect(DEFAULT_RETRY_DELAYS_MS.reduce((a, b) => a + b, 0) / 3_600_000).toBeCloseTo(27.585, 2)
})

test('a configured schedule is read with its units, and a malformed one is refused naming the part', () => {
  expect(parseRetryDelays('50ms, 1s,2m,1h', 'WEBHOOK_RETRY_SCHEDULE')).toEqual([50, 1000, 120_000, 3_600_000])
  expect(nextRetryDelay(2, [50, 100])).toBe(100)
  expect(nextRetryDelay(3, [50, 100])).toBeNull()
  expect(() => parseRetryDelays('5s,soon', 'WEBHOOK_RETRY_SCHEDULE')).toThrow('WEBHOOK_RETRY_SCHEDULE: "soon" is not a duration such as 500ms, 5s, 5m or 2h')
  expect(() => parseRetryDelays('-5s', 'X')).toThrow('"-5s"')
  expect(() => parseRetryDelays(Array(MAX_RETRIES + 1).fill('1s').join(','), 'X')).toThrow(`at most ${MAX_RETRIES}`)
  expect(() => parseRetryDelays('0ms', 'X')).toThrow('X: "0ms" must be between 1ms and 24h')
  expect(() => parseRetryDelays('25h', 'X')).toThrow('X: "25h" must be between 1ms and 24h')
  expect(parseRetryDelays('24h', 'X')).toEqual([86_400_000])
})
