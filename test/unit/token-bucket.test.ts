// The client-event budget: 5 a second, burst 10.
import { expect, test } from 'bun:test'
import { TokenBucket } from '../../gateway/token-bucket'

test('a full bucket allows a burst of 10, then refuses', () => {
  const bucket = new TokenBucket(5, 10, 0)
  expect(Array.from({ length: 11 }, () => bucket.take(0))).toEqual([...Array(10).fill(true), false])
})

test('it refills at 5 a second, never above the burst', () => {
  const bucket = new TokenBucket(5, 10, 0)
  for (let i = 0; i < 10; i++) bucket.take(0)
  expect(bucket.take(199)).toBe(false) // 0.995 of a token
  expect(bucket.take(200)).toBe(true)
  expect(bucket.take(200)).toBe(false)
  expect(Array.from({ length: 11 }, () => bucket.take(60_000))).toEqual([...Array(10).fill(true), false])
})

test('a sustained 5 a second is always allowed', () => {
  const bucket = new TokenBucket(5, 10, 0)
  for (let ms = 0; ms < 10_000; ms += 200) expect(bucket.take(ms)).toBe(true)
})
