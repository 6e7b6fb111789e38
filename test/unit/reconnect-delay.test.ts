// The reference client's wait before reconnecting, derived from the close-code table's reconnect rules.
import { describe, expect, test } from 'bun:test'
import { backoffDelay, reconnectDelay } from '../../shared/realtime-client/client'
import { closeCodeOf, DISCONNECTS } from '../../shared/realtime/close-codes'

const half = () => 0.5

describe('reconnectDelay', () => {
  test('4001 (fresh token) and 4100 (draining) reconnect at once, the first time in a row only', () => {
    for (const code of [4001, 4100]) {
      expect(reconnectDelay(code, 0, 500, 20_000, half)).toBe(0)
      expect(reconnectDelay(code, 1, 500, 20_000, half)).toBe(backoffDelay(1, 500, 20_000, half))
    }
  })

  test('4200 (slow consumer) and closes the gateway does not name back off from the first attempt', () => {
    for (const code of [4200, 1000, 1006, 4999]) {
      expect(reconnectDelay(code, 0, 500, 20_000, half)).toBe(250)
      expect(reconnectDelay(code, 3, 500, 20_000, half)).toBe(2000)
    }
  })

  test('4300 (a limit) waits 5 s on top of the backoff, every time', () => {
    expect(reconnectDelay(4300, 0, 500, 20_000, () => 0)).toBe(5000)
    expect(reconnectDelay(4300, 3, 500, 20_000, half)).toBe(7000)
  })

  test("the close-code table holds the four gateway codes and the runtime's 1009, each with its rule; other codes have none", () => {
    expect(Object.values(DISCONNECTS).map((d) => [d.code, d.reconnect])).toEqual([
      [4001, 'at-once-fresh-token'], [4100, 'at-once'], [4200, 'backoff'], [4300, 'backoff-after-min-delay'], [1009, 'backoff'],
    ])
    expect(closeCodeOf(4300)?.minDelayMs).toBe(5000)
    expect(closeCodeOf(1006)).toBeUndefined()
  })
})

test('the reference client stays dependency-free: it imports only the close-code table, which imports nothing', async () => {
  const importsOf = async (path: string) =>
    [...(await Bun.file(new URL(path, import.meta.url)).text()).matchAll(/^import .* from '([^']+)'/gm)].map((m) => m[1])
  expect(await importsOf('../../shared/realtime-client/client.ts')).toEqual(['../realtime/close-codes'])
  expect(await importsOf('../../shared/realtime/close-codes.ts')).toEqual([])
})
