// The archive's cursor and time parsing (shared/realtime/archive-read.ts): pure functions, no service needed.
import { describe, expect, test } from 'bun:test'
import { ApiError } from '../../shared/errors'
import { decodeCursor, encodeCursor, parseZonedTime } from '../../shared/realtime/archive-read'

const product = '4c0e6e9a-1f7e-4a53-9a55-1d2a6f0b8c11'
const position = { t: 1_795_620_820_217, epoch: '9f1c2d3e4a5b6c7d', offset: 42 }

/** The 400 a bad cursor is, with the field it names. */
function refusal(call: () => unknown): { status: number; fields: string[] } {
  try {
    call()
  } catch (error) {
    if (!(error instanceof ApiError)) throw error
    return { status: error.status, fields: ((error.extra.fields ?? []) as { path: string }[]).map((f) => f.path) }
  }
  throw new Error('not refused')
}

describe('archive cursors', () => {
  test('a cursor names the position it was made from, for its channel and order', () => {
    const cursor = encodeCursor(product, 'chat:1', 'newest', position)
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/)
    expect(decodeCursor(product, 'chat:1', 'newest', cursor)).toEqual(position)
  })

  test('another channel, product or order, or an altered or malformed cursor, is a 400 naming the cursor', () => {
    const cursor = encodeCursor(product, 'chat:1', 'newest', position)
    const bad = { status: 400, fields: ['/query/cursor'] }
    expect(refusal(() => decodeCursor(product, 'chat:2', 'newest', cursor))).toEqual(bad)
    expect(refusal(() => decodeCursor(product.replace('4c0e', '5c0e'), 'chat:1', 'newest', cursor))).toEqual(bad)
    expect(refusal(() => decodeCursor(product, 'chat:1', 'oldest', cursor))).toEqual(bad)
    const altered = JSON.parse(Buffer.from(cursor, 'base64url').toString())
    altered[4] = -1
    expect(refusal(() => decodeCursor(product, 'chat:1', 'newest', Buffer.from(JSON.stringify(altered)).toString('base64url')))).toEqual(bad)
    altered[4] = 'x'
    expect(refusal(() => decodeCursor(product, 'chat:1', 'newest', Buffer.from(JSON.stringify(altered)).toString('base64url')))).toEqual(bad)
    for (const junk of ['', 'not a cursor', cursor.slice(0, 10), Buffer.from('{"a":1}').toString('base64url'), 'x'.repeat(401)]) {
      expect(refusal(() => decodeCursor(product, 'chat:1', 'newest', junk))).toEqual(bad)
    }
  })
})

describe('archive cursors are tamper-proof', () => {
  const cursor = encodeCursor(product, 'chat:1', 'newest', position)
  const bad = { status: 400, fields: ['/query/cursor'] }
  /** The cursor with the part holding `was` (a part of the position) set to `now`, the rest (its MAC) kept. */
  const forged = (was: unknown, now: unknown) => {
    const parts = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as unknown[]
    parts[parts.indexOf(was)] = now
    return Buffer.from(JSON.stringify(parts)).toString('base64url')
  }

  test('an altered position with the MAC kept is a 400, not a read elsewhere', () => {
    expect(refusal(() => decodeCursor(product, 'chat:1', 'newest', forged(position.offset, 41)))).toEqual(bad)
    expect(refusal(() => decodeCursor(product, 'chat:1', 'newest', forged(position.t, position.t - 1)))).toEqual(bad)
    expect(refusal(() => decodeCursor(product, 'chat:1', 'newest', forged(position.epoch, 'other')))).toEqual(bad)
  })

  test('times no timestamp holds (past year 9999, before year 1, an Invalid Date) are a 400', () => {
    for (const t of [9e15, 253_402_300_800_000, -62_135_596_800_001, 8.64e15]) {
      expect(refusal(() => decodeCursor(product, 'chat:1', 'newest', forged(position.t, t)))).toEqual(bad)
    }
    // The last millisecond of 9999 and the first of year 1 are positions a cursor can name.
    for (const t of [253_402_300_799_999, -62_135_596_800_000]) {
      const edge = encodeCursor(product, 'chat:1', 'newest', { ...position, t })
      expect(decodeCursor(product, 'chat:1', 'newest', edge).t).toBe(t)
    }
  })
})

describe('parseZonedTime', () => {
  test('ISO-8601 times with a zone, to the millisecond', () => {
    expect(parseZonedTime('2026-11-25T12:00:00Z')?.toISOString()).toBe('2026-11-25T12:00:00.000Z')
    expect(parseZonedTime('2026-11-25T12:00:00.123Z')?.toISOString()).toBe('2026-11-25T12:00:00.123Z')
    expect(parseZonedTime('2026-11-25T14:00+02:00')?.toISOString()).toBe('2026-11-25T12:00:00.000Z')
    expect(parseZonedTime('2026-11-25T00:30:00-05:30')?.toISOString()).toBe('2026-11-25T06:00:00.000Z')
    expect(parseZonedTime('2024-02-29T00:00:00Z')?.toISOString()).toBe('2024-02-29T00:00:00.000Z')
  })

  test('no zone, impossible dates and times, offsets past ±14:00 and other text are refused', () => {
    for (const text of ['2026-11-25T12:00:00', '2026-11-25', '2026-02-30T00:00:00Z', '2026-02-29T00:00:00Z', '2026-11-25T24:00:00Z',
      '2026-11-25T12:60:00Z', '2026-11-25T12:00:00+15:00', '2026-11-25T12:00:00+01:60', 'yesterday', '1764072000000', '']) {
      expect(parseZonedTime(text)).toBeNull()
    }
  })
})
