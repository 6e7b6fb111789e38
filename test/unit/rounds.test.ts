// Background rounds on a timer (gateway revocation and presence sweeps): a round still running when the next is due is
// skipped, never run twice at once.
import { expect, test } from 'bun:test'
import { everyUnlessRunning } from '../../gateway/rounds'

test('a round slower than its interval is never doubled, and the next one starts once it has finished', async () => {
  let running = 0
  let most = 0
  let rounds = 0
  const timer = everyUnlessRunning(10, async () => {
    rounds++
    most = Math.max(most, ++running)
    await Bun.sleep(100) // a slow backend: ten ticks pass during one round
    running--
  })
  await Bun.sleep(450)
  clearInterval(timer)
  expect(most).toBe(1)
  expect(rounds).toBeGreaterThanOrEqual(2)
  expect(rounds).toBeLessThanOrEqual(5)
})

test('a failing round does not stop the next', async () => {
  let rounds = 0
  const timer = everyUnlessRunning(10, async () => {
    rounds++
    throw new Error('backend down')
  })
  await Bun.sleep(200)
  clearInterval(timer)
  expect(rounds).toBeGreaterThan(2)
})
